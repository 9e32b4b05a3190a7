package dev.kvrouter.extproc.template.jinja;

import dev.kvrouter.extproc.template.TemplateSyntaxException;
import java.math.BigInteger;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * jinja2's lexer, as transformers configures it ({@code trim_blocks=True, lstrip_blocks=True},
 * default delimiters, {@code keep_trailing_newline=False}). Whitespace handling follows
 * {@code jinja2.lexer.Lexer.tokeniter} rule by rule: {@code {%-} strips all whitespace before a
 * tag, {@code -%}} all after; {@code lstrip_blocks} removes a tag's indentation when only
 * whitespace precedes it on its line (not for {@code {{ }}}); {@code trim_blocks} eats the one
 * newline after {@code %}} and {@code #}}; {@code +} turns either off. "Whitespace" is Python's
 * definition, which includes characters Java's {@code \s} does not.
 */
final class Lexer {
  private static final Pattern FLOAT = Pattern.compile(
      "(?<!\\.)(\\d+_)*\\d+((\\.(\\d+_)*\\d+)?e[+\\-]?(\\d+_)*\\d+|\\.(\\d+_)*\\d+)", Pattern.CASE_INSENSITIVE);
  private static final Pattern INTEGER = Pattern.compile(
      "0b(_?[0-1])+|0o(_?[0-7])+|0x(_?[\\da-f])+|[1-9](_?\\d)*|0(_?0)*", Pattern.CASE_INSENSITIVE);
  private static final Pattern NAME = Pattern.compile("[\\p{L}\\p{Nl}_][\\p{L}\\p{Nl}\\p{Mn}\\p{Mc}\\p{Nd}\\p{Pc}]*");
  private static final Pattern STRING = Pattern.compile(
      "'([^'\\\\]*(?:\\\\.[^'\\\\]*)*)'|\"([^\"\\\\]*(?:\\\\.[^\"\\\\]*)*)\"", Pattern.DOTALL);
  private static final String[] OPERATORS = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
      "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};

  private final String src;
  private final List<Token> out = new ArrayList<>();
  private int pos;
  private int line = 1;
  private boolean lineStarting = true;

  private Lexer(String src) {
    this.src = src;
  }

  static List<Token> tokenize(String source) {
    Lexer lx = new Lexer(normalizeNewlines(source));
    lx.run();
    return lx.out;
  }

  /** Every newline becomes {@code \n}; one trailing newline is dropped (keep_trailing_newline=False). */
  static String normalizeNewlines(String s) {
    String n = s.indexOf('\r') >= 0 ? s.replace("\r\n", "\n").replace('\r', '\n') : s;
    return n.endsWith("\n") ? n.substring(0, n.length() - 1) : n;
  }

  private TemplateSyntaxException fail(String msg) {
    return new TemplateSyntaxException(msg, line);
  }

  private static boolean allSpace(String s, int from) {
    if (from >= s.length()) {
      return false;
    }
    for (int i = from; i < s.length(); ) {
      int cp = s.codePointAt(i);
      if (!PyStr.isSpace(cp)) {
        return false;
      }
      i += Character.charCount(cp);
    }
    return true;
  }

  private int skipSpace(int p) {
    while (p < src.length()) {
      int cp = src.codePointAt(p);
      if (!PyStr.isSpace(cp)) {
        break;
      }
      p += Character.charCount(cp);
    }
    return p;
  }

  private void emitData(String text) {
    if (!text.isEmpty()) {
      out.add(new Token(Token.Type.DATA, text, null, line));
    }
  }

  private void countLines(String s) {
    for (int i = 0; i < s.length(); i++) {
      if (s.charAt(i) == '\n') {
        line++;
      }
    }
  }

  /** Text before a tag, after {@code -} stripping or lstrip_blocks. */
  private String stripBefore(String text, char sign, boolean isVariable) {
    if (sign == '-') {
      return PyStr.strip(text, null, false, true);
    }
    if (sign != '+' && !isVariable) {
      int lpos = text.lastIndexOf('\n') + 1;
      if ((lpos > 0 || lineStarting) && allSpace(text, lpos)) {
        return text.substring(0, lpos);
      }
    }
    return text;
  }

  /** Python's {@code \\s} (str.isspace) as a regex character class body. */
  private static final String SPACE = "\\t\\n\\x0b\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
  private static final Pattern RAW_BEGIN = Pattern.compile("\\{%([-+]?)[" + SPACE + "]*raw[" + SPACE + "]*(?:-%}["
      + SPACE + "]*|%})");
  private static final Pattern RAW_END = Pattern.compile("\\{%([-+]?)[" + SPACE + "]*endraw[" + SPACE
      + "]*(\\+%}|-%}[" + SPACE + "]*|%}\\n?)");

  private void run() {
    int n = src.length();
    while (pos < n) {
      int tag = findTag(pos);
      if (tag < 0) {
        String rest = src.substring(pos);
        emitData(rest);
        countLines(rest);
        pos = n;
        break;
      }
      String text = src.substring(pos, tag);
      char kind = src.charAt(tag + 1);
      Matcher raw = kind == '%' ? RAW_BEGIN.matcher(src).region(tag, n) : null;
      if (raw != null && raw.lookingAt()) {
        char sign = raw.group(1).isEmpty() ? 0 : raw.group(1).charAt(0);
        emitData(stripBefore(text, sign, false));
        countLines(text);
        countLines(raw.group());
        lineStarting = raw.group().endsWith("\n");
        pos = raw.end();
        lexRaw();
        continue;
      }
      char sign = tag + 2 < n && (src.charAt(tag + 2) == '-' || src.charAt(tag + 2) == '+') ? src.charAt(tag + 2) : 0;
      emitData(stripBefore(text, sign, kind == '{'));
      countLines(text);
      lineStarting = false;
      pos = tag + 2 + (sign != 0 ? 1 : 0);
      switch (kind) {
        case '#' -> lexComment();
        case '%' -> {
          out.add(new Token(Token.Type.BLOCK_BEGIN, "{%", null, line));
          lexTag(true);
        }
        default -> {
          out.add(new Token(Token.Type.VARIABLE_BEGIN, "{{", null, line));
          lexTag(false);
        }
      }
    }
    out.add(new Token(Token.Type.EOF, "", null, line));
  }

  private int findTag(int from) {
    int i = from;
    while ((i = src.indexOf('{', i)) >= 0 && i + 1 < src.length()) {
      char c = src.charAt(i + 1);
      if (c == '%' || c == '{' || c == '#') {
        return i;
      }
      i++;
    }
    return -1;
  }

  private void lexComment() {
    int n = src.length();
    for (int k = pos; k < n; k++) {
      int end;
      if (src.startsWith("+#}", k)) {
        end = k + 3;
      } else if (src.startsWith("-#}", k)) {
        end = skipSpace(k + 3);
      } else if (src.startsWith("#}", k)) {
        end = k + 2;
        if (end < n && src.charAt(end) == '\n') {
          end++;
        }
      } else {
        continue;
      }
      String matched = src.substring(pos, end);
      countLines(matched);
      lineStarting = matched.endsWith("\n");
      pos = end;
      return;
    }
    throw fail("Missing end of comment tag");
  }

  private void lexRaw() {
    Matcher m = RAW_END.matcher(src);
    if (!m.find(pos)) {
      throw fail("Missing end of raw directive");
    }
    String text = src.substring(pos, m.start());
    char sign = m.group(1).isEmpty() ? 0 : m.group(1).charAt(0);
    emitData(stripBefore(text, sign, false));
    countLines(text);
    countLines(m.group());
    lineStarting = m.group().endsWith("\n");
    pos = m.end();
  }

  private void lexTag(boolean block) {
    int n = src.length();
    Deque<Character> balance = new ArrayDeque<>();
    while (true) {
      if (pos >= n) {
        throw fail("unexpected end of template, expected '" + (block ? "%}" : "}}") + "'");
      }
      if (balance.isEmpty()) {
        int end = matchEnd(block);
        if (end >= 0) {
          String matched = src.substring(pos, end);
          out.add(new Token(block ? Token.Type.BLOCK_END : Token.Type.VARIABLE_END, block ? "%}" : "}}", null, line));
          countLines(matched);
          lineStarting = matched.endsWith("\n");
          pos = end;
          return;
        }
      }
      int cp = src.codePointAt(pos);
      if (PyStr.isSpace(cp)) {
        int e = skipSpace(pos);
        countLines(src.substring(pos, e));
        pos = e;
        continue;
      }
      Matcher m;
      if ((m = at(FLOAT)) != null) {
        String v = m.group().replace("_", "");
        out.add(new Token(Token.Type.FLOAT, m.group(), Double.parseDouble(v), line));
        pos = m.end();
      } else if ((m = at(INTEGER)) != null) {
        out.add(new Token(Token.Type.INTEGER, m.group(), parseInt(m.group()), line));
        pos = m.end();
      } else if ((m = at(NAME)) != null) {
        // Interned so frames can match names by identity (see Frame).
        out.add(new Token(Token.Type.NAME, m.group().intern(), null, line));
        pos = m.end();
      } else if ((m = at(STRING)) != null) {
        String body = m.group().substring(1, m.group().length() - 1);
        out.add(new Token(Token.Type.STRING, m.group(), decodeString(body), line));
        countLines(m.group());
        pos = m.end();
      } else {
        String op = null;
        for (String o : OPERATORS) {
          if (src.startsWith(o, pos)) {
            op = o;
            break;
          }
        }
        if (op == null) {
          throw fail("unexpected char '" + new String(Character.toChars(cp)) + "' at " + pos);
        }
        switch (op) {
          case "{" -> balance.push('}');
          case "(" -> balance.push(')');
          case "[" -> balance.push(']');
          case "}", ")", "]" -> {
            if (balance.isEmpty()) {
              throw fail("unexpected '" + op + "'");
            }
            char expected = balance.pop();
            if (expected != op.charAt(0)) {
              throw fail("unexpected '" + op + "', expected '" + expected + "'");
            }
          }
          default -> { }
        }
        out.add(new Token(Token.Type.OPERATOR, op, null, line));
        pos += op.length();
      }
    }
  }

  /** End of the current tag at {@code pos}, or -1. */
  private int matchEnd(boolean block) {
    if (block) {
      if (src.startsWith("+%}", pos)) {
        return pos + 3;
      }
      if (src.startsWith("-%}", pos)) {
        return skipSpace(pos + 3);
      }
      if (src.startsWith("%}", pos)) {
        int e = pos + 2;
        return e < src.length() && src.charAt(e) == '\n' ? e + 1 : e;
      }
      return -1;
    }
    if (src.startsWith("-}}", pos)) {
      return skipSpace(pos + 3);
    }
    if (src.startsWith("}}", pos)) {
      return pos + 2;
    }
    return -1;
  }

  private Matcher at(Pattern p) {
    Matcher m = p.matcher(src);
    m.region(pos, src.length());
    m.useTransparentBounds(true);
    m.useAnchoringBounds(false);
    return m.lookingAt() ? m : null;
  }

  private static Object parseInt(String text) {
    String t = text.replace("_", "").toLowerCase();
    BigInteger v;
    if (t.startsWith("0b")) {
      v = new BigInteger(t.substring(2), 2);
    } else if (t.startsWith("0o")) {
      v = new BigInteger(t.substring(2), 8);
    } else if (t.startsWith("0x")) {
      v = new BigInteger(t.substring(2), 16);
    } else {
      v = new BigInteger(t);
    }
    return PyOps.normalize(v);
  }

  /**
   * A string literal's value: jinja2 encodes it with {@code backslashreplace} and decodes it with
   * Python's {@code unicode-escape} codec. Reproduced directly, including the odd case of a
   * backslash in front of a non-ASCII character.
   */
  String decodeString(String s) {
    StringBuilder sb = new StringBuilder(s.length());
    int n = s.length();
    for (int i = 0; i < n; ) {
      char c = s.charAt(i);
      if (c != '\\') {
        sb.append(c);
        i++;
        continue;
      }
      if (i + 1 >= n) {
        throw fail("\\ at end of string");
      }
      int cp = s.codePointAt(i + 1);
      i += 1 + Character.charCount(cp);
      if (cp >= 0x80) {
        // The replacement's own backslash is consumed by ours: "\é" reads as "\xe9" literally.
        String hex = Integer.toHexString(cp);
        sb.append('\\');
        if (cp < 0x100) {
          sb.append('x').append("0".repeat(2 - hex.length())).append(hex);
        } else if (cp < 0x10000) {
          sb.append('u').append("0".repeat(4 - hex.length())).append(hex);
        } else {
          sb.append('U').append("0".repeat(8 - hex.length())).append(hex);
        }
        continue;
      }
      switch (cp) {
        case '\n' -> { }
        case '\\' -> sb.append('\\');
        case '\'' -> sb.append('\'');
        case '"' -> sb.append('"');
        case 'a' -> sb.append('\u0007');
        case 'b' -> sb.append('\b');
        case 'f' -> sb.append('\f');
        case 'n' -> sb.append('\n');
        case 'r' -> sb.append('\r');
        case 't' -> sb.append('\t');
        case 'v' -> sb.append('\u000b');
        case 'x', 'u', 'U' -> {
          int len = cp == 'x' ? 2 : cp == 'u' ? 4 : 8;
          if (i + len > n || !s.substring(i, i + len).chars().allMatch(ch -> Character.digit(ch, 16) >= 0)) {
            throw fail("truncated \\" + (char) cp + "XX" + (len > 2 ? "XX" : "") + " escape");
          }
          long v = Long.parseLong(s.substring(i, i + len), 16);
          if (v > 0x10FFFF) {
            throw fail("illegal Unicode character");
          }
          sb.appendCodePoint((int) v);
          i += len;
        }
        case 'N' -> {
          int close = s.indexOf('}', i);
          if (i >= n || s.charAt(i) != '{' || close < 0) {
            throw fail("malformed \\N character escape");
          }
          try {
            sb.appendCodePoint(Character.codePointOf(s.substring(i + 1, close)));
          } catch (IllegalArgumentException e) {
            throw fail("unknown Unicode character name");
          }
          i = close + 1;
        }
        default -> {
          if (cp >= '0' && cp <= '7') {
            int v = cp - '0';
            int k = 0;
            while (k < 2 && i < n && s.charAt(i) >= '0' && s.charAt(i) <= '7') {
              v = v * 8 + (s.charAt(i) - '0');
              i++;
              k++;
            }
            sb.appendCodePoint(v);
          } else {
            sb.append('\\').appendCodePoint(cp);
          }
        }
      }
    }
    return sb.toString();
  }
}
