package dev.kvrouter.extproc.tokenize;

import java.text.Normalizer;
import java.util.List;

/**
 * The supported {@code normalizer} steps of tokenizer.json: none, NFC, literal {@code Replace}, and
 * sequences of them. Applied to one segment at a time, as tokenizers does (each piece between added tokens
 * is normalized on its own). Immutable and thread-safe.
 */
interface TextNormalizer {

  /** A slice of a char sequence: the normalized form of a segment, often the input itself. */
  record Span(CharSequence text, int start, int end) {
    int length() {
      return end - start;
    }

    @Override
    public String toString() {
      return text.subSequence(start, end).toString();
    }
  }

  Span normalize(CharSequence text, int start, int end);

  /** True if the normalizer never changes text (so added-token matching can skip normalization). */
  default boolean isIdentity() {
    return false;
  }

  TextNormalizer IDENTITY = new TextNormalizer() {
    @Override
    public Span normalize(CharSequence text, int start, int end) {
      return new Span(text, start, end);
    }

    @Override
    public boolean isIdentity() {
      return true;
    }
  };

  /**
   * Unicode NFC by {@link java.text.Normalizer}. Text below U+0300 is already NFC, so prose, code and JSON
   * never pay for it. Java 17 normalizes with Unicode 13 data; a code point assigned only in a later version
   * (which the reference may compose or reorder) makes the segment {@link BeyondJavaUnicodeException
   * unsupported} so the caller can hand it to the reference implementation.
   */
  TextNormalizer NFC = (text, start, end) -> {
    int i = start;
    while (i < end && text.charAt(i) < 0x300) {
      i++;
    }
    if (i == end) {
      return new Span(text, start, end);
    }
    while (i < end) {
      int cp = SplitPattern.cpAt(text, i, end);
      if (cp >= 0x300 && Character.getType(cp) == Character.UNASSIGNED && UnicodeClasses.of(cp) != 0) {
        throw BeyondJavaUnicodeException.INSTANCE;
      }
      i += SplitPattern.len(cp);
    }
    CharSequence slice = text.subSequence(start, end);
    if (Normalizer.isNormalized(slice, Normalizer.Form.NFC)) {
      return new Span(text, start, end);
    }
    String n = Normalizer.normalize(slice, Normalizer.Form.NFC);
    return new Span(n, 0, n.length());
  };

  /** A segment Java's Unicode tables cannot normalize exactly; thrown without a stack trace. */
  final class BeyondJavaUnicodeException extends RuntimeException {
    static final BeyondJavaUnicodeException INSTANCE = new BeyondJavaUnicodeException();

    private BeyondJavaUnicodeException() {
      super("text has a code point newer than Java's Unicode tables", null, false, false);
    }
  }

  /** {@code Replace} with a literal pattern. */
  static TextNormalizer replace(String pattern, String content) {
    if (pattern.isEmpty()) {
      throw new IllegalArgumentException("empty Replace pattern");
    }
    return (text, start, end) -> {
      int first = indexOf(text, pattern, start, end);
      if (first < 0) {
        return new Span(text, start, end);
      }
      StringBuilder sb = new StringBuilder(end - start + 16);
      int pos = start;
      for (int i = first; i >= 0; i = indexOf(text, pattern, pos, end)) {
        sb.append(text, pos, i).append(content);
        pos = i + pattern.length();
      }
      sb.append(text, pos, end);
      return new Span(sb, 0, sb.length());
    };
  }

  private static int indexOf(CharSequence text, String pattern, int from, int end) {
    char first = pattern.charAt(0);
    int n = pattern.length();
    outer:
    for (int i = from; i + n <= end; i++) {
      if (text.charAt(i) != first) {
        continue;
      }
      for (int k = 1; k < n; k++) {
        if (text.charAt(i + k) != pattern.charAt(k)) {
          continue outer;
        }
      }
      return i;
    }
    return -1;
  }

  /** Applies the steps in order. */
  static TextNormalizer sequence(List<TextNormalizer> steps) {
    List<TextNormalizer> real = steps.stream().filter(s -> !s.isIdentity()).toList();
    if (real.isEmpty()) {
      return IDENTITY;
    }
    if (real.size() == 1) {
      return real.get(0);
    }
    return (text, start, end) -> {
      Span s = new Span(text, start, end);
      for (TextNormalizer step : real) {
        s = step.normalize(s.text(), s.start(), s.end());
      }
      return s;
    };
  }
}
