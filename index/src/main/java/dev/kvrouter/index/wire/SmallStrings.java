package dev.kvrouter.index.wire;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A tiny direct-mapped cache from UTF-8 bytes to String for the few values that repeat in every event
 * ({@code "GPU"}, {@code "full_attention"}, adapter names), so decoding them does not allocate. Not thread-safe:
 * one per reader.
 */
final class SmallStrings {
  private static final int SIZE = 64;
  private static final int MAX_LEN = 64;
  private final byte[][] keys = new byte[SIZE][];
  private final String[] values = new String[SIZE];

  String get(byte[] buf, int off, int len) {
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
