package dev.kvrouter.extproc.tokenize;

/**
 * Token string to id for building the tables at load: open addressing without boxing, and a lookup of the
 * concatenation of two strings that neither allocates nor rehashes ({@link String#hashCode()} of {@code
 * a + b} is {@code a.hashCode() * 31^b.length() + b.hashCode()}, and strings cache their hash). Not used
 * after load. Not thread-safe while being filled.
 */
final class StringIntMap {
  private final String[] keys;
  private final int[] values;
  private final int mask;
  private final int[] pow31;
  private int size;
  private int maxKeyLength;

  StringIntMap(int expected) {
    int cap = Integer.highestOneBit(Math.max(16, expected * 2 - 1)) << 1;
    keys = new String[cap];
    values = new int[cap];
    mask = cap - 1;
    pow31 = new int[1024];
    pow31[0] = 1;
    for (int i = 1; i < pow31.length; i++) {
      pow31[i] = pow31[i - 1] * 31;
    }
  }

  static StringIntMap of(String[] tokens, int[] ids) {
    StringIntMap m = new StringIntMap(tokens.length);
    for (int i = 0; i < tokens.length; i++) {
      m.put(tokens[i], ids[i]);
    }
    return m;
  }

  private static int mix(int h) {
    h *= 0x9E3779B9;
    return h ^ (h >>> 16);
  }

  /** Adds or replaces (a later duplicate key wins, as in a JSON object read into a map). */
  void put(String key, int value) {
    if ((size + 1) * 2 > keys.length) {
      throw new IllegalStateException("StringIntMap sized for fewer entries");
    }
    int i = mix(key.hashCode()) & mask;
    while (keys[i] != null && !keys[i].equals(key)) {
      i = (i + 1) & mask;
    }
    if (keys[i] == null) {
      size++;
    }
    keys[i] = key;
    values[i] = value;
    maxKeyLength = Math.max(maxKeyLength, key.length());
  }

  /** The id of {@code key}, or -1. */
  int get(String key) {
    int i = mix(key.hashCode()) & mask;
    while (true) {
      String k = keys[i];
      if (k == null) {
        return -1;
      }
      if (k.equals(key)) {
        return values[i];
      }
      i = (i + 1) & mask;
    }
  }

  /** The id of {@code a + b}, or -1, without building the string. */
  int getConcat(String a, String b) {
    int len = a.length() + b.length();
    if (len > maxKeyLength) {
      return -1;
    }
    if (b.length() >= pow31.length) {
      return get(a.concat(b));
    }
    int h = a.hashCode() * pow31[b.length()] + b.hashCode();
    int i = mix(h) & mask;
    while (true) {
      String k = keys[i];
      if (k == null) {
        return -1;
      }
      if (k.length() == len && k.hashCode() == h && k.startsWith(a) && k.startsWith(b, a.length())) {
        return values[i];
      }
      i = (i + 1) & mask;
    }
  }

  int size() {
    return size;
  }
}
