package dev.kvrouter.index.wire;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * Matches a map key or an event tag in a payload against {@link WireKeys} by comparing its bytes eight at a time
 * as little-endian longs with precomputed constants: the key's length picks the candidates (at most four), its
 * first word tells them apart (checked in the static initializer), and the remaining words confirm the match. A
 * map event of vLLM carries eight keys, so a byte-array comparison per candidate was most of a key's cost.
 *
 * <p>Stateless and thread-safe.
 */
final class WireKeyTable {

  static final int UNKNOWN = -1;
  /** Tag codes: {@link #tag}'s answers. */
  static final int STORED = 0;
  static final int REMOVED = 1;
  static final int CLEARED = 2;

  private static final int MAX_LEN = 31;
  private static final VarHandle LE_LONG = MethodHandles.byteArrayViewVarHandle(long[].class,
      ByteOrder.LITTLE_ENDIAN);

  /** Per key length, the codes of the keys of that length; per code, the key's words (last one zero-padded). */
  private static final int[][] KEYS_BY_LENGTH = new int[MAX_LEN + 1][];
  private static final long[][] KEY_WORDS = words(WireKeys.KEYS);
  private static final int[][] TAGS_BY_LENGTH = new int[MAX_LEN + 1][];
  private static final byte[][] TAGS = {WireKeys.T_STORED, WireKeys.T_REMOVED, WireKeys.T_CLEARED};
  private static final long[][] TAG_WORDS = words(TAGS);

  static {
    index(WireKeys.KEYS, KEY_WORDS, KEYS_BY_LENGTH);
    index(TAGS, TAG_WORDS, TAGS_BY_LENGTH);
  }

  private WireKeyTable() {}

  /** The {@link WireKeys} code of the key {@code buf[at, at + len)}, or {@link #UNKNOWN}. */
  static int key(byte[] buf, int at, int len) {
    return match(buf, at, len, KEYS_BY_LENGTH, KEY_WORDS);
  }

  /** {@link #STORED}, {@link #REMOVED} or {@link #CLEARED} for the event tag {@code buf[at, at + len)}, else {@link #UNKNOWN}. */
  static int tag(byte[] buf, int at, int len) {
    return match(buf, at, len, TAGS_BY_LENGTH, TAG_WORDS);
  }

  private static int match(byte[] buf, int at, int len, int[][] byLength, long[][] words) {
    if (len > MAX_LEN) {
      return UNKNOWN;
    }
    int[] codes = byLength[len];
    if (codes == null) {
      return UNKNOWN;
    }
    long w0 = word(buf, at, Math.min(len, 8));
    for (int code : codes) {
      long[] w = words[code];
      if (w[0] == w0) {
        // the first word is unique among keys of one length: the rest either confirms this key or none
        for (int k = 1, off = 8; off < len; k++, off += 8) {
          if (word(buf, at + off, Math.min(len - off, 8)) != w[k]) {
            return UNKNOWN;
          }
        }
        return code;
      }
    }
    return UNKNOWN;
  }

  /** The {@code n} (0..8) bytes at {@code at} as a little-endian long, zero above them. */
  static long word(byte[] buf, int at, int n) {
    if (at + 8 <= buf.length) {
      long v = (long) LE_LONG.get(buf, at);
      return n == 8 ? v : v & ((1L << (n << 3)) - 1);
    }
    long v = 0; // the key ends within 8 bytes of the array's end: byte by byte
    for (int i = n - 1; i >= 0; i--) {
      v = (v << 8) | (buf[at + i] & 0xFF);
    }
    return v;
  }

  private static long[][] words(byte[][] keys) {
    long[][] w = new long[keys.length][];
    for (int c = 0; c < keys.length; c++) {
      byte[] k = keys[c];
      w[c] = new long[Math.max(1, (k.length + 7) / 8)];
      for (int off = 0, j = 0; off < k.length; off += 8, j++) {
        w[c][j] = word(k, off, Math.min(k.length - off, 8));
      }
    }
    return w;
  }

  private static void index(byte[][] keys, long[][] words, int[][] byLength) {
    for (int c = 0; c < keys.length; c++) {
      int len = keys[c].length;
      if (len == 0 || len > MAX_LEN) {
        throw new ExceptionInInitializerError("key length out of range: " + len);
      }
      int[] old = byLength[len] == null ? new int[0] : byLength[len];
      for (int other : old) {
        if (words[other][0] == words[c][0]) {
          throw new ExceptionInInitializerError("two keys of length " + len + " share their first 8 bytes");
        }
      }
      int[] n = java.util.Arrays.copyOf(old, old.length + 1);
      n[old.length] = c;
      byLength[len] = n;
    }
  }
}
