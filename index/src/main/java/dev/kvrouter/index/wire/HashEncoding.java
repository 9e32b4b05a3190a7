package dev.kvrouter.index.wire;

/** How an encoder writes block hashes; the decoder reads all three forms to the same {@code long}. */
public enum HashEncoding {
  /** vLLM's default: the unsigned low 64 bits, so values at or above 2^63 become msgpack uint64. */
  UNSIGNED,
  /** Older producers (vLLM builtin-hash era, LMCache): signed int64, negative for the upper half. */
  SIGNED,
  /**
   * {@code VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0}: a 32-byte {@code bin} digest whose last 8 bytes
   * (big-endian) are the hash; the leading 24 bytes are filler derived from the value.
   */
  BYTES
}
