package dev.kvrouter.extproc.tokenize;

import static dev.kvrouter.extproc.tokenize.UnicodeClasses.FOLD_D;
import static dev.kvrouter.extproc.tokenize.UnicodeClasses.FOLD_E;
import static dev.kvrouter.extproc.tokenize.UnicodeClasses.FOLD_L;
import static dev.kvrouter.extproc.tokenize.UnicodeClasses.FOLD_M;
import static dev.kvrouter.extproc.tokenize.UnicodeClasses.FOLD_R;
import static dev.kvrouter.extproc.tokenize.UnicodeClasses.FOLD_S;
import static dev.kvrouter.extproc.tokenize.UnicodeClasses.FOLD_T;
import static dev.kvrouter.extproc.tokenize.UnicodeClasses.FOLD_V;
import static dev.kvrouter.extproc.tokenize.UnicodeClasses.LETTER;
import static dev.kvrouter.extproc.tokenize.UnicodeClasses.MARK;
import static dev.kvrouter.extproc.tokenize.UnicodeClasses.NUMBER;
import static dev.kvrouter.extproc.tokenize.UnicodeClasses.PUNCT;
import static dev.kvrouter.extproc.tokenize.UnicodeClasses.SPACE;
import static dev.kvrouter.extproc.tokenize.UnicodeClasses.SYMBOL;

import java.util.Optional;

/**
 * A hand-written matcher for one pre-tokenizer regex of a {@code Split} step: {@link #matchAt} answers what
 * the regex would match when anchored at a position, with the regex's leftmost-first alternation and
 * backtracking semantics. Only the exact patterns of the supported tokenizers exist; anything else is
 * rejected at load time so the DJL implementation is used instead.
 *
 * <p>Stateless and thread-safe. Positions are UTF-16 indices; matching is by code point.
 */
interface SplitPattern {

  /** End of the match anchored at {@code pos} within {@code [pos, end)}, or -1 if none; never {@code pos}. */
  int matchAt(CharSequence s, int pos, int end);

  /** GPT-4 / Llama 3 (digits in runs of 1..3). */
  String LLAMA3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

  /** Qwen 2/2.5/3 (digits one by one). */
  String QWEN =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

  /** DeepSeek V3 step 1: digits in runs of 1..3. */
  String DEEPSEEK_DIGITS = "\\p{N}{1,3}";

  /** DeepSeek V3 step 2: runs of CJK ideographs and kana. */
  String DEEPSEEK_CJK = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+";

  /** DeepSeek V3 step 3: words, punctuation and whitespace. */
  String DEEPSEEK_WORDS =
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

  /** The hand-written matcher for a regex from tokenizer.json, if we have one for exactly that pattern. */
  static Optional<SplitPattern> forRegex(String regex) {
    switch (regex) {
      case LLAMA3:
        return Optional.of(new Gpt4Style(3));
      case QWEN:
        return Optional.of(new Gpt4Style(1));
      case DEEPSEEK_DIGITS:
        return Optional.of(new Digits(3));
      case DEEPSEEK_CJK:
        return Optional.of(new CjkRun());
      case DEEPSEEK_WORDS:
        return Optional.of(new DeepSeekWords());
      default:
        return Optional.empty();
    }
  }

  /** A literal string pattern ({@code {"String": ...}} in tokenizer.json). */
  static SplitPattern literal(String literal) {
    if (literal.isEmpty()) {
      throw new IllegalArgumentException("empty split literal");
    }
    return (s, pos, end) -> {
      int n = literal.length();
      if (pos + n > end) {
        return -1;
      }
      for (int i = 0; i < n; i++) {
        if (s.charAt(pos + i) != literal.charAt(i)) {
          return -1;
        }
      }
      return pos + n;
    };
  }

  // ---------------------------------------------------------------------------------------------------

  static int cpAt(CharSequence s, int i, int end) {
    char c = s.charAt(i);
    if (Character.isHighSurrogate(c) && i + 1 < end) {
      char d = s.charAt(i + 1);
      if (Character.isLowSurrogate(d)) {
        return Character.toCodePoint(c, d);
      }
    }
    return c;
  }

  static int len(int cp) {
    return cp >= 0x10000 ? 2 : 1;
  }

  /** End of the run of code points having any of {@code classes}, starting at {@code pos}. */
  static int scan(CharSequence s, int pos, int end, int classes) {
    int p = pos;
    while (p < end) {
      int c = cpAt(s, p, end);
      if ((UnicodeClasses.of(c) & classes) == 0) {
        break;
      }
      p += len(c);
    }
    return p;
  }

  /** End of the run of code points having none of {@code classes}, starting at {@code pos}. */
  static int scanNot(CharSequence s, int pos, int end, int classes) {
    int p = pos;
    while (p < end) {
      int c = cpAt(s, p, end);
      if ((UnicodeClasses.of(c) & classes) != 0) {
        break;
      }
      p += len(c);
    }
    return p;
  }

  static int skipCrLf(CharSequence s, int pos, int end) {
    int p = pos;
    while (p < end) {
      char c = s.charAt(p);
      if (c != '\r' && c != '\n') {
        break;
      }
      p++;
    }
    return p;
  }

  /**
   * The three whitespace alternatives every supported pattern ends with, at a whitespace code point:
   * {@code \s*[\r\n]+} (up to and including the run's last CR/LF), else {@code \s+(?!\S)} (the whole run
   * at the end of the text, or all but its last code point before a non-space), else {@code \s+}.
   */
  static int whitespace(CharSequence s, int pos, int end) {
    int p = pos;
    int lastNl = -1;
    int lastStart = pos;
    int count = 0;
    while (p < end) {
      int c = cpAt(s, p, end);
      if ((UnicodeClasses.of(c) & SPACE) == 0) {
        break;
      }
      if (c == '\r' || c == '\n') {
        lastNl = p;
      }
      lastStart = p;
      p += len(c);
      count++;
    }
    if (lastNl >= 0) {
      return lastNl + 1;
    }
    if (p == end || count == 1) {
      return p;
    }
    return lastStart;
  }

  /**
   * {@code (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,k}| ?[^\s\p{L}\p{N}]+[\r\n]*|
   * \s*[\r\n]+|\s+(?!\S)|\s+}: matches at every position, so the split has no gaps.
   */
  final class Gpt4Style implements SplitPattern {
    private final int maxDigits;

    Gpt4Style(int maxDigits) {
      this.maxDigits = maxDigits;
    }

    @Override
    public int matchAt(CharSequence s, int pos, int end) {
      int c = cpAt(s, pos, end);
      int n = len(c);
      int f = UnicodeClasses.of(c);
      if (c == '\'' && pos + 1 < end) {
        int c1 = cpAt(s, pos + 1, end);
        int f1 = UnicodeClasses.of(c1);
        int p2 = pos + 1 + len(c1);
        if ((f1 & (FOLD_S | FOLD_T | FOLD_M | FOLD_D)) != 0) {
          return p2;
        }
        if ((f1 & (FOLD_R | FOLD_V | FOLD_L)) != 0 && p2 < end) {
          int c2 = cpAt(s, p2, end);
          int f2 = UnicodeClasses.of(c2);
          if (((f1 & (FOLD_R | FOLD_V)) != 0 && (f2 & FOLD_E) != 0) || ((f1 & FOLD_L) != 0 && (f2 & FOLD_L) != 0)) {
            return p2 + len(c2);
          }
        }
      }
      if ((f & LETTER) != 0) {
        return scan(s, pos, end, LETTER);
      }
      if (c != '\r' && c != '\n' && (f & NUMBER) == 0 && pos + n < end
          && (UnicodeClasses.of(cpAt(s, pos + n, end)) & LETTER) != 0) {
        return scan(s, pos + n, end, LETTER);
      }
      if ((f & NUMBER) != 0) {
        int p = pos;
        for (int k = 0; k < maxDigits && p < end; k++) {
          int d = cpAt(s, p, end);
          if ((UnicodeClasses.of(d) & NUMBER) == 0) {
            break;
          }
          p += len(d);
        }
        return p;
      }
      int p = c == ' ' ? pos + 1 : pos;
      if (p < end) {
        int d = cpAt(s, p, end);
        if ((UnicodeClasses.of(d) & (SPACE | LETTER | NUMBER)) == 0) {
          return skipCrLf(s, scanNot(s, p + len(d), end, SPACE | LETTER | NUMBER), end);
        }
      }
      if ((f & SPACE) != 0) {
        return whitespace(s, pos, end);
      }
      return -1;
    }
  }

  /** {@code \p{N}{1,k}}. */
  final class Digits implements SplitPattern {
    private final int max;

    Digits(int max) {
      this.max = max;
    }

    @Override
    public int matchAt(CharSequence s, int pos, int end) {
      int p = pos;
      for (int k = 0; k < max && p < end; k++) {
        int d = cpAt(s, p, end);
        if ((UnicodeClasses.of(d) & NUMBER) == 0) {
          break;
        }
        p += len(d);
      }
      return p == pos ? -1 : p;
    }
  }

  /** {@code [\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+}. */
  final class CjkRun implements SplitPattern {
    static boolean cjk(char c) {
      return (c >= '\u4e00' && c <= '\u9fa5') || (c >= '\u3040' && c <= '\u309f') || (c >= '\u30a0' && c <= '\u30ff');
    }

    @Override
    public int matchAt(CharSequence s, int pos, int end) {
      int p = pos;
      while (p < end && cjk(s.charAt(p))) {
        p++;
      }
      return p == pos ? -1 : p;
    }
  }

  /**
   * {@code [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
   * ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+}: may leave gaps (digits, controls, format chars).
   */
  final class DeepSeekWords implements SplitPattern {
    private static boolean asciiPunct(int c) {
      return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
    }

    private static boolean asciiLetter(char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    }

    @Override
    public int matchAt(CharSequence s, int pos, int end) {
      int c = cpAt(s, pos, end);
      int n = len(c);
      int f = UnicodeClasses.of(c);
      if (asciiPunct(c) && pos + 1 < end && asciiLetter(s.charAt(pos + 1))) {
        int p = pos + 2;
        while (p < end && asciiLetter(s.charAt(p))) {
          p++;
        }
        return p;
      }
      if ((f & (LETTER | MARK)) != 0) {
        return scan(s, pos, end, LETTER | MARK);
      }
      if (c != '\r' && c != '\n' && (f & (LETTER | PUNCT | SYMBOL)) == 0 && pos + n < end
          && (UnicodeClasses.of(cpAt(s, pos + n, end)) & (LETTER | MARK)) != 0) {
        return scan(s, pos + n, end, LETTER | MARK);
      }
      int p = c == ' ' ? pos + 1 : pos;
      if (p < end) {
        int d = cpAt(s, p, end);
        if ((UnicodeClasses.of(d) & (PUNCT | SYMBOL)) != 0) {
          return skipCrLf(s, scan(s, p + len(d), end, PUNCT | SYMBOL), end);
        }
      }
      if ((f & SPACE) != 0) {
        return whitespace(s, pos, end);
      }
      return -1;
    }
  }
}
