package dev.kvrouter.index.block;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import net.openhft.hashing.LongHashFunction;

/**
 * The router's one block identity function, shared by the request path (tokens of a prompt) and the event
 * path (tokens carried by {@code BlockStored}).
 *
 * <pre>
 *   root            = rootSeed(namespace)
 *   hash(block 0)   = XXH3_64(seed = CHAIN_SEED, LE64(root)          || LE32(t_0) .. LE32(t_{b-1}) [|| LE64(extra)])
 *   hash(block i)   = XXH3_64(seed = CHAIN_SEED, LE64(hash(i - 1))   || LE32(tokens of block i)     [|| LE64(extra)])
 * </pre>
 *
 * <p>Only full blocks are hashed. Because every hash folds in its parent, one 64-bit value names a whole
 * prefix, and the namespace (model, adapter, salt) enters once at the root and propagates down the chain,
 * the same way vLLM propagates {@code cache_salt} from the first block. {@code extra} is an optional per-block
 * key (a multimodal item hash at its offset); zero means none and adds no bytes, so text-only chains never
 * pay for it.
 *
 * <p>The engine's own block hash is never used as identity: it depends on {@code PYTHONHASHSEED} and the
 * engine's hash algorithm. It is only a per-worker handle for parents and removals.
 *
 * <p>Thread-safe and allocation-free after the first call on a thread (one scratch buffer per thread).
 */
public final class BlockHasher {

  /** Fixed seed of the chain ("kvrouter" in ASCII); changing it changes every identity. */
  public static final long CHAIN_SEED = 0x6B76726F75746572L;

  /** Format version folded into every root, bumped if the identity function ever changes. */
  static final int IDENTITY_VERSION = 1;

  private static final LongHashFunction XXH3 = LongHashFunction.xx3(CHAIN_SEED);
  private static final VarHandle LE_INT =
      MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle LE_LONG =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  private static final ThreadLocal<byte[][]> SCRATCH = ThreadLocal.withInitial(() -> new byte[][] {new byte[1024]});

  private BlockHasher() {}

  /**
   * The chain root for a namespace: XXH3 over a length-prefixed encoding of (version, model, adapter, salt),
   * so no two distinct namespaces can encode to the same bytes.
   */
  public static long rootSeed(CacheNamespace ns) {
    byte[] model = ns.model().getBytes(StandardCharsets.UTF_8);
    byte[] adapter = ns.adapter() == null ? null : ns.adapter().getBytes(StandardCharsets.UTF_8);
    byte[] salt = ns.cacheSalt() == null ? null : ns.cacheSalt().getBytes(StandardCharsets.UTF_8);
    int n = 4 + field(model) + field(adapter) + field(salt);
    byte[] buf = new byte[n];
    int p = 0;
    LE_INT.set(buf, p, IDENTITY_VERSION);
    p += 4;
    p = put(buf, p, model);
    p = put(buf, p, adapter);
    put(buf, p, salt);
    return XXH3.hashBytes(buf);
  }

  /** Hash of one block given its parent's hash (or the namespace root for block 0). */
  public static long blockHash(long parent, int[] tokens, int off, int blockSize, long extra) {
    return blockHash(parent, tokens, off, blockSize, extra, scratch(scratchSize(blockSize)));
  }

  /** Bytes of scratch {@link #blockHash(long, int[], int, int, long, byte[])} needs for {@code blockSize}. */
  public static int scratchSize(int blockSize) {
    return 16 + 4 * blockSize;
  }

  /**
   * As {@link #blockHash(long, int[], int, int, long)}, with a caller-owned scratch buffer of at least
   * {@link #scratchSize} bytes, for hot loops that should not look up a thread-local per block.
   */
  public static long blockHash(long parent, int[] tokens, int off, int blockSize, long extra, byte[] buf) {
    int n = 8 + 4 * blockSize + (extra != 0 ? 8 : 0);
    LE_LONG.set(buf, 0, parent);
    int p = 8;
    for (int i = off, end = off + blockSize; i < end; i++, p += 4) {
      LE_INT.set(buf, p, tokens[i]);
    }
    if (extra != 0) {
      LE_LONG.set(buf, p, extra);
    }
    return XXH3.hashBytes(buf, 0, n);
  }

  /**
   * Hashes the full blocks of {@code tokens[0, tokenCount)} into {@code out}, chained from {@code root}.
   *
   * @return the number of full blocks hashed ({@code tokenCount / blockSize}, capped by {@code out.length})
   */
  public static int hashFullBlocks(long root, int[] tokens, int tokenCount, int blockSize, long[] out) {
    if (blockSize <= 0) {
      throw new IllegalArgumentException("blockSize must be positive, was " + blockSize);
    }
    int blocks = Math.min(tokenCount / blockSize, out.length);
    long parent = root;
    for (int b = 0; b < blocks; b++) {
      parent = blockHash(parent, tokens, b * blockSize, blockSize, 0L);
      out[b] = parent;
    }
    return blocks;
  }

  /**
   * The chain of the first {@code extras.length} full blocks of {@code tokens}, block {@code b} hashed with
   * {@code extras[b]} (0: none), as for a prompt with multimodal items.
   */
  public static long[] hashBlocksWithExtras(long root, int[] tokens, int blockSize, long[] extras) {
    if (blockSize <= 0 || (long) extras.length * blockSize > tokens.length) {
      throw new IllegalArgumentException(extras.length + " blocks of " + blockSize + " tokens need more than "
          + tokens.length + " tokens");
    }
    long[] out = new long[extras.length];
    long parent = root;
    for (int b = 0; b < out.length; b++) {
      parent = blockHash(parent, tokens, b * blockSize, blockSize, extras[b]);
      out[b] = parent;
    }
    return out;
  }

  /** Convenience form of {@link #hashFullBlocks(long, int[], int, int, long[])} that sizes the result. */
  public static long[] hashFullBlocks(long root, int[] tokens, int tokenCount, int blockSize) {
    if (blockSize <= 0) {
      throw new IllegalArgumentException("blockSize must be positive, was " + blockSize);
    }
    long[] out = new long[tokenCount / blockSize];
    hashFullBlocks(root, tokens, tokenCount, blockSize, out);
    return out;
  }

  /** Offset value meaning "the engine sent a bare identifier without an offset" (older vLLM multimodal keys). */
  public static final int NO_OFFSET = Integer.MIN_VALUE;

  /** Seed of the multimodal extra value, distinct from the chain seed so the two never coincide by design. */
  static final long EXTRA_SEED = CHAIN_SEED ^ 0x6D756C74696D6F64L; // "multimod"

  private static final LongHashFunction XXH3_EXTRA = LongHashFunction.xx3(EXTRA_SEED);

  /**
   * The per-block {@code extra} value for the multimodal items overlapping a block, the one helper both the
   * request path and the event path use.
   *
   * <pre>
   *   extra = XXH3_64(seed = EXTRA_SEED, for each item in order: LE32(len(utf8(id))) || utf8(id) || LE32(offset))
   *   (0 is replaced by 1, because 0 means "no extra")
   * </pre>
   *
   * <p>Items are in the engine's order (vLLM: by position in the prompt). {@code identifiers[i]} is the item's
   * identifier as the engine keys it: the content part's {@code uuid} when the client supplied one (vLLM
   * uses user-provided multimodal uuids as identifiers), else the engine's content hash. {@code offsets[i]} is
   * the item's start minus the block's first token index (negative when the item started in an earlier
   * block), as vLLM's {@code [identifier, offset]} extra key; {@link #NO_OFFSET} for a bare identifier.
   *
   * @return 0 if {@code count == 0}, else a non-zero value
   */
  public static long multimodalExtra(CharSequence[] identifiers, int[] offsets, int from, int count) {
    if (count == 0) {
      return 0L;
    }
    int n = 0;
    for (int i = from; i < from + count; i++) {
      n += 8 + 3 * identifiers[i].length(); // UTF-8 takes at most 3 bytes per UTF-16 unit
    }
    byte[] buf = scratch(n);
    int p = 0;
    for (int i = from; i < from + count; i++) {
      byte[] id = identifiers[i].toString().getBytes(StandardCharsets.UTF_8);
      LE_INT.set(buf, p, id.length);
      System.arraycopy(id, 0, buf, p + 4, id.length);
      p += 4 + id.length;
      LE_INT.set(buf, p, offsets[i]);
      p += 4;
    }
    long h = XXH3_EXTRA.hashBytes(buf, 0, p);
    return h == 0 ? 1 : h;
  }

  private static int field(byte[] b) {
    return 1 + (b == null ? 0 : 4 + b.length);
  }

  private static int put(byte[] buf, int p, byte[] b) {
    if (b == null) {
      buf[p] = 0;
      return p + 1;
    }
    buf[p] = 1;
    LE_INT.set(buf, p + 1, b.length);
    System.arraycopy(b, 0, buf, p + 5, b.length);
    return p + 5 + b.length;
  }

  private static byte[] scratch(int n) {
    byte[][] holder = SCRATCH.get();
    if (holder[0].length < n) {
      holder[0] = new byte[Math.max(n, holder[0].length * 2)];
    }
    return holder[0];
  }
}
