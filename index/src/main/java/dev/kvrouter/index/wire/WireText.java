package dev.kvrouter.index.wire;

import java.util.Arrays;
import java.util.List;

/** Printing and comparison helpers for wire values (unsigned hashes, nested extra keys with byte arrays). */
final class WireText {

  private WireText() {}

  static String hashes(long[] hashes) {
    StringBuilder b = new StringBuilder("[");
    for (int i = 0; i < hashes.length; i++) {
      if (i > 0) {
        b.append(", ");
      }
      if (i == 8 && hashes.length > 10) {
        b.append("... ").append(hashes.length - 8).append(" more");
        break;
      }
      b.append(Long.toUnsignedString(hashes[i]));
    }
    return b.append(']').toString();
  }

  /** Structural equality that compares {@code byte[]} by content, at any nesting depth. */
  static boolean deepEquals(Object a, Object b) {
    if (a == b) {
      return true;
    }
    if (a == null || b == null) {
      return false;
    }
    if (a instanceof byte[] x && b instanceof byte[] y) {
      return Arrays.equals(x, y);
    }
    if (a instanceof List<?> x && b instanceof List<?> y) {
      if (x.size() != y.size()) {
        return false;
      }
      for (int i = 0; i < x.size(); i++) {
        if (!deepEquals(x.get(i), y.get(i))) {
          return false;
        }
      }
      return true;
    }
    return a.equals(b);
  }
}
