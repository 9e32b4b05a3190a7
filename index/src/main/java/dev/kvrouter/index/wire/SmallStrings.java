package dev.kvrouter.index.wire;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A tiny direct-mapped cache from UTF-8 bytes to String for the few values that repeat in every event
 * ({@code "GPU"}, {@code "full_attention"}, adapter names), so decoding them does not allocate and a repeated value
 * is the same instance. Strings of up to 8 bytes (the media) are keyed by their bytes as one long, so a hit is one
 * comparison. Not thread-safe: one per reader.
 */
final class SmallStrings {
  private static final int SIZE = 64;
  private static final int MAX_LEN = 64;
  private final byte[][] keys = new byte[SIZE][];
  private final String[] values = new String[SIZE];
  /** Short strings: per slot the bytes as a little-endian word, the length, the string. */
  private final long[] shortWords = new long[SIZE];
  private final int[] shortLens = new int[SIZE];
  private final String[] shortValues = new String[SIZE];

  String get(byte[] buf, int off, int len) {
    if (len <= 8 && off + 8 <= buf.length) {
      long w = WireKeyTable.word(buf, off, len);
      long h = (w ^ len) * 0x9E3779B97F4A7C15L;
      int slot = (int) (h >>> 58); // SIZE = 64
      String v = shortValues[slot];
      if (v != null && shortWords[slot] == w && shortLens[slot] == len) {
        return v;
      }
      v = new String(buf, off, len, StandardCharsets.UTF_8);
      shortWords[slot] = w;
      shortLens[slot] = len;
      shortValues[slot] = v;
      return v;
    }
    if (len > MAX_LEN) {
      return new String(buf, off, len, StandardCharsets.UTF_8);
    }
    int h = 1;
    for (int i = off; i < off + len; i++) {
      h = 31 * h + buf[i];
    }
    int slot = (h ^ (h >>> 16)) & (SIZE - 1);
    byte[] k = keys[slot];
    if (k != null && k.length == len && Arrays.equals(k, 0, len, buf, off, off + len)) {
      return values[slot];
    }
    String s = new String(buf, off, len, StandardCharsets.UTF_8);
    keys[slot] = Arrays.copyOfRange(buf, off, off + len);
    values[slot] = s;
    return s;
  }
}
