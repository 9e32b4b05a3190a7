package dev.kvrouter.extproc.tokenize;

/**
 * GPT-2's byte-to-unicode table used by ByteLevel vocabularies: printable bytes map to themselves, the other
 * 68 bytes to U+0100 and up, in byte order.
 */
final class ByteLevelAlphabet {
  static final char[] CHARS = new char[256];
  private static final int[] BYTES = new int[0x200];

  static {
    java.util.Arrays.fill(BYTES, -1);
    int n = 0;
    for (int b = 0; b < 256; b++) {
      boolean printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      CHARS[b] = printable ? (char) b : (char) (256 + n++);
      BYTES[CHARS[b]] = b;
    }
  }

  private ByteLevelAlphabet() {}

  /** The raw bytes a byte-level token string stands for, or null if it is not one. */
  static byte[] decode(String token) {
    byte[] out = new byte[token.length()];
    for (int i = 0; i < token.length(); i++) {
      char c = token.charAt(i);
      if (c >= BYTES.length || BYTES[c] < 0) {
        return null;
      }
      out[i] = (byte) BYTES[c];
    }
    return out;
  }
}
