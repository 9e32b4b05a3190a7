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
   * Unicode NFC as the tokenizers library computes it, by {@link java.text.Normalizer}. Text below U+0300 is
   * already NFC, so prose, code and JSON never pay for it.
   *
   * <p>The library's NFC uses old Unicode tables (generated into {@link UnicodeClasses}): a code point it
   * does not know is a plain starter there (no reordering, no composition across it) while Java 17 knows its
   * combining class. Such a code point splits the text, the parts are normalized on their own and it is
   * kept as is, which is exactly what the library computes. A code point the library knows and Java does
   * not cannot be emulated: {@link BeyondJavaUnicodeException} hands the segment to the reference.
   */
  TextNormalizer NFC = (text, start, end) -> {
    int i = start;
    while (i < end && text.charAt(i) < 0x300) {
      i++;
    }
    if (i == end) {
      return new Span(text, start, end);
    }
    boolean unknownToReference = false;
    while (i < end) {
      int cp = SplitPattern.cpAt(text, i, end);
      int f = UnicodeClasses.of(cp);
      if ((f & UnicodeClasses.NFC_RELEVANT) != 0) {
        boolean referenceKnows = (f & UnicodeClasses.NFC_KNOWN) != 0;
        boolean javaKnows = Character.getType(cp) != Character.UNASSIGNED;
        if (referenceKnows && !javaKnows) {
          throw BeyondJavaUnicodeException.INSTANCE;
        }
        unknownToReference |= !referenceKnows && javaKnows;
      }
      i += SplitPattern.len(cp);
    }
    if (!unknownToReference) {
      CharSequence slice = text.subSequence(start, end);
      if (Normalizer.isNormalized(slice, Normalizer.Form.NFC)) {
        return new Span(text, start, end);
      }
      String n = Normalizer.normalize(slice, Normalizer.Form.NFC);
      return new Span(n, 0, n.length());
    }
    StringBuilder sb = new StringBuilder(end - start);
    int part = start;
    i = start;
    while (i < end) {
      int cp = SplitPattern.cpAt(text, i, end);
      int f = UnicodeClasses.of(cp);
      int next = i + SplitPattern.len(cp);
      if ((f & (UnicodeClasses.NFC_RELEVANT | UnicodeClasses.NFC_KNOWN)) == UnicodeClasses.NFC_RELEVANT) {
        sb.append(Normalizer.normalize(text.subSequence(part, i), Normalizer.Form.NFC));
        sb.append(text, i, next);
        part = next;
      }
      i = next;
    }
    sb.append(Normalizer.normalize(text.subSequence(part, end), Normalizer.Form.NFC));
    return new Span(sb, 0, sb.length());
  };

  /** A segment the reference normalizes with data Java lacks; thrown without a stack trace. */
  final class BeyondJavaUnicodeException extends RuntimeException {
    static final BeyondJavaUnicodeException INSTANCE = new BeyondJavaUnicodeException();

    private BeyondJavaUnicodeException() {
      super("text has a code point Java's Unicode tables do not know", null, false, false);
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
