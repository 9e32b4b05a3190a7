package dev.kvrouter.index.wire;

/**
 * One KV-cache event as vLLM and SGLang publish it (see {@code docs/index.md} and the wire spec).
 *
 * <p>The three records carry every field the engines have put on the wire so far; fields a given engine
 * or release does not send are {@code null}. Block hashes are the engine's own opaque 64-bit handles,
 * normalised to a Java {@code long} (two's-complement bit pattern of the engine's uint64).
 */
public sealed interface KvEvent permits BlockStored, BlockRemoved, AllBlocksCleared {

  /** The class name the engines use as the event tag (array element 0, or the map key {@code "type"}). */
  String tag();
}
