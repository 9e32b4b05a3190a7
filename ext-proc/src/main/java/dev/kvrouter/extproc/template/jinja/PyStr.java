package dev.kvrouter.extproc.template.jinja;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Python {@code str} semantics on Java strings. Python indexes by code point while Java indexes
 * by UTF-16 unit, so lengths, indices and slices go through code points whenever the string
 * holds a surrogate pair (emoji, rare CJK); the common all-BMP case takes the direct path.
 */
final class PyStr {
  private PyStr() {}

  /** Python's {@code str.isspace} for one code point (Unicode 14, as in Python 3.11). */
  static boolean isSpace(int cp) {
    if (cp < 0x80) {
      return cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f);
    }
    return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a)
        || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
  }

  /** Line boundaries of {@code str.splitlines}. */
  static boolean isLineBreak(int cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d
        || cp == 0x1e || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
  }

  static boolean hasSurrogates(String s) {
    for (int i = 0; i < s.length(); i++) {
      if (Character.isSurrogate(s.charAt(i))) {
        return true;
      }
    }
    return false;
  }

  static int len(String s) {
    return hasSurrogates(s) ? s.codePointCount(0, s.length()) : s.length();
  }

  /** UTF-16 offset of code point index {@code cpIndex} (0..len). */
  static int offset(String s, int cpIndex) {
    return hasSurrogates(s) ? s.offsetByCodePoints(0, cpIndex) : cpIndex;
  }

  /** Python {@code s[i]}; null when out of range. */
  static String index(String s, long i) {
    if (!hasSurrogates(s)) {
      long n = s.length();
      long k = i < 0 ? i + n : i;
      return k < 0 || k >= n ? null : String.valueOf(s.charAt((int) k));
    }
    int[] cps = s.codePoints().toArray();
    long k = i < 0 ? i + cps.length : i;
    return k < 0 || k >= cps.length ? null : new String(cps, (int) k, 1);
  }

  static String slice(String s, long[] sl) {
    int start = (int) sl[0];
    int step = (int) sl[2];
    int count = (int) sl[3];
    if (count <= 0) {
      return "";
    }
    if (!hasSurrogates(s)) {
      if (step == 1) {
        return s.substring(start, start + count);
      }
      StringBuilder sb = new StringBuilder(count);
      for (int i = 0, k = start; i < count; i++, k += step) {
        sb.append(s.charAt(k));
      }
      return sb.toString();
    }
    int[] cps = s.codePoints().toArray();
    StringBuilder sb = new StringBuilder(count);
    for (int i = 0, k = start; i < count; i++, k += step) {
      sb.appendCodePoint(cps[k]);
    }
    return sb.toString();
  }

  static List<Object> chars(String s) {
    List<Object> out = new ArrayList<>(s.length());
    s.codePoints().forEach(cp -> out.add(new String(Character.toChars(cp))));
    return out;
  }

  // ---- stripping -------------------------------------------------------------------------------

  static String strip(String s, String chars, boolean left, boolean right) {
    int start = 0;
    int end = s.length();
    if (left) {
      while (start < end) {
        int cp = s.codePointAt(start);
        if (!stripped(cp, chars)) {
          break;
        }
        start += Character.charCount(cp);
      }
    }
    if (right) {
      while (end > start) {
        int cp = s.codePointBefore(end);
        if (!stripped(cp, chars)) {
          break;
        }
        end -= Character.charCount(cp);
      }
    }
    return s.substring(start, end);
  }

  private static boolean stripped(int cp, String chars) {
    return chars == null ? isSpace(cp) : chars.indexOf(new String(Character.toChars(cp))) >= 0;
  }

  // ---- splitting -------------------------------------------------------------------------------

  static List<Object> split(String s, String sep, long maxsplit) {
    List<Object> out = new ArrayList<>();
    if (sep == null) {
      int i = 0;
      int n = s.length();
      while (true) {
        while (i < n && isSpace(s.codePointAt(i))) {
          i += Character.charCount(s.codePointAt(i));
        }
        if (i >= n) {
          break;
        }
        if (maxsplit >= 0 && out.size() >= maxsplit) {
          out.add(s.substring(i));
          break;
        }
        int j = i;
        while (j < n && !isSpace(s.codePointAt(j))) {
          j += Character.charCount(s.codePointAt(j));
        }
        out.add(s.substring(i, j));
        i = j;
      }
      return out;
    }
    if (sep.isEmpty()) {
      throw JinjaError.value("empty separator");
    }
    int i = 0;
    while (maxsplit < 0 || out.size() < maxsplit) {
      int j = s.indexOf(sep, i);
      if (j < 0) {
        break;
      }
      out.add(s.substring(i, j));
      i = j + sep.length();
    }
    out.add(s.substring(i));
    return out;
  }

  static List<Object> rsplit(String s, String sep, long maxsplit) {
    if (maxsplit < 0) {
      return split(s, sep, -1);
    }
    List<Object> out = new ArrayList<>();
    if (sep == null) {
      int j = s.length();
      while (true) {
        while (j > 0 && isSpace(s.codePointBefore(j))) {
          j -= Character.charCount(s.codePointBefore(j));
        }
        if (j <= 0) {
          break;
        }
        if (out.size() >= maxsplit) {
          out.add(s.substring(0, j));
          break;
        }
        int i = j;
        while (i > 0 && !isSpace(s.codePointBefore(i))) {
          i -= Character.charCount(s.codePointBefore(i));
        }
        out.add(s.substring(i, j));
        j = i;
      }
      java.util.Collections.reverse(out);
      return out;
    }
    if (sep.isEmpty()) {
      throw JinjaError.value("empty separator");
    }
    int j = s.length();
    while (out.size() < maxsplit) {
      int i = s.lastIndexOf(sep, j - sep.length());
      if (i < 0 || j - sep.length() < 0) {
        break;
      }
      out.add(s.substring(i + sep.length(), j));
      j = i;
    }
    out.add(s.substring(0, j));
    java.util.Collections.reverse(out);
    return out;
  }

  static List<Object> splitlines(String s, boolean keepends) {
    List<Object> out = new ArrayList<>();
    int n = s.length();
    int start = 0;
    int i = 0;
    while (i < n) {
      int cp = s.codePointAt(i);
      int w = Character.charCount(cp);
      if (isLineBreak(cp)) {
        int eol = i + w;
        if (cp == '\r' && eol < n && s.charAt(eol) == '\n') {
          eol++;
        }
        out.add(s.substring(start, keepends ? eol : i));
        start = eol;
        i = eol;
      } else {
        i += w;
      }
    }
    if (start < n) {
      out.add(s.substring(start));
    }
    return out;
  }

  // ---- searching -------------------------------------------------------------------------------

  /** Resolves Python start/end arguments (code points, may be negative/None) to UTF-16 bounds. */
  static int[] bounds(String s, Object start, Object end) {
    int n = len(s);
    long st = start == null ? 0 : PyOps.toIndex(start);
    long en = end == null ? n : PyOps.toIndex(end);
    if (st < 0) {
      st = Math.max(0, st + n);
    }
    if (en < 0) {
      en = Math.max(0, en + n);
    }
    st = Math.min(st, n);
    en = Math.min(en, n);
    if (st > en) {
      return null;
    }
    return new int[] {offset(s, (int) st), offset(s, (int) en)};
  }

  static long find(String s, String sub, Object start, Object end, boolean reverse) {
    int[] b = bounds(s, start, end);
    if (b == null) {
      return -1;
    }
    String region = s.substring(b[0], b[1]);
    int idx = reverse ? region.lastIndexOf(sub) : region.indexOf(sub);
    if (idx < 0) {
      return -1;
    }
    int utf16 = b[0] + idx;
    return hasSurrogates(s) ? s.codePointCount(0, utf16) : utf16;
  }

  static long count(String s, String sub, Object start, Object end) {
    int[] b = bounds(s, start, end);
    if (b == null) {
      return 0;
    }
    String region = s.substring(b[0], b[1]);
    if (sub.isEmpty()) {
      return len(region) + 1L;
    }
    long c = 0;
    int i = 0;
    while ((i = region.indexOf(sub, i)) >= 0) {
      c++;
      i += sub.length();
    }
    return c;
  }

  static String replace(String s, String old, String neu, long count) {
    if (count < 0) {
      count = Long.MAX_VALUE;
    }
    StringBuilder sb = new StringBuilder(s.length());
    if (old.isEmpty()) {
      long done = 0;
      int i = 0;
      while (i <= s.length()) {
        if (done < count) {
          sb.append(neu);
          done++;
        }
        if (i == s.length()) {
          break;
        }
        int cp = s.codePointAt(i);
        sb.appendCodePoint(cp);
        i += Character.charCount(cp);
      }
      return sb.toString();
    }
    int i = 0;
    long done = 0;
    while (done < count) {
      int j = s.indexOf(old, i);
      if (j < 0) {
        break;
      }
      sb.append(s, i, j).append(neu);
      i = j + old.length();
      done++;
    }
    return sb.append(s, i, s.length()).toString();
  }

  static boolean startsOrEnds(String s, Object affix, Object start, Object end, boolean ends, String method) {
    int[] b = bounds(s, start, end);
    List<Object> candidates;
    if (affix instanceof PyTuple t) {
      candidates = t.items();
    } else {
      candidates = List.of(affix);
    }
    for (Object c : candidates) {
      if (!PyTypes.isStr(c)) {
        throw JinjaError.type(method + " first arg must be str or a tuple of str, not " + PyTypes.typeName(c));
      }
    }
    if (b == null) {
      return false;
    }
    String region = s.substring(b[0], b[1]);
    for (Object c : candidates) {
      String p = PyTypes.str(c);
      if (ends ? region.endsWith(p) : region.startsWith(p)) {
        return true;
      }
    }
    return false;
  }

  // ---- case ------------------------------------------------------------------------------------

  static String upper(String s) {
    return s.toUpperCase(Locale.ROOT);
  }

  static String lower(String s) {
    return s.toLowerCase(Locale.ROOT);
  }

  static boolean isCased(int cp) {
    return Character.isUpperCase(cp) || Character.isLowerCase(cp) || Character.isTitleCase(cp);
  }

  private static String titleChar(int cp) {
    // Python uses the full titlecase mapping; Java offers the simple one, except for the few
    // characters whose full mapping expands (handled through upper case, e.g. 'ß' -> 'Ss').
    String up = new String(Character.toChars(cp)).toUpperCase(Locale.ROOT);
    if (up.codePointCount(0, up.length()) > 1) {
      int first = up.codePointAt(0);
      return new String(Character.toChars(first))
          + up.substring(Character.charCount(first)).toLowerCase(Locale.ROOT);
    }
    return new String(Character.toChars(Character.toTitleCase(cp)));
  }

  static String title(String s) {
    StringBuilder sb = new StringBuilder(s.length());
    boolean prevCased = false;
    for (int i = 0; i < s.length(); ) {
      int cp = s.codePointAt(i);
      String c = new String(Character.toChars(cp));
      sb.append(prevCased ? c.toLowerCase(Locale.ROOT) : titleChar(cp));
      prevCased = isCased(cp);
      i += Character.charCount(cp);
    }
    return sb.toString();
  }

  static String capitalize(String s) {
    if (s.isEmpty()) {
      return s;
    }
    int cp = s.codePointAt(0);
    return titleChar(cp) + s.substring(Character.charCount(cp)).toLowerCase(Locale.ROOT);
  }

  static String swapcase(String s) {
    StringBuilder sb = new StringBuilder(s.length());
    s.codePoints().forEach(cp -> {
      String c = new String(Character.toChars(cp));
      if (Character.isUpperCase(cp)) {
        sb.append(c.toLowerCase(Locale.ROOT));
      } else if (Character.isLowerCase(cp)) {
        sb.append(c.toUpperCase(Locale.ROOT));
      } else {
        sb.append(c);
      }
    });
    return sb.toString();
  }

  static boolean isUpperStr(String s) {
    boolean cased = false;
    for (int i = 0; i < s.length(); ) {
      int cp = s.codePointAt(i);
      if (Character.isLowerCase(cp) || Character.isTitleCase(cp)) {
        return false;
      }
      if (Character.isUpperCase(cp)) {
        cased = true;
      }
      i += Character.charCount(cp);
    }
    return cased;
  }

  static boolean isLowerStr(String s) {
    boolean cased = false;
    for (int i = 0; i < s.length(); ) {
      int cp = s.codePointAt(i);
      if (Character.isUpperCase(cp) || Character.isTitleCase(cp)) {
        return false;
      }
      if (Character.isLowerCase(cp)) {
        cased = true;
      }
      i += Character.charCount(cp);
    }
    return cased;
  }

  static boolean all(String s, java.util.function.IntPredicate p) {
    if (s.isEmpty()) {
      return false;
    }
    return s.codePoints().allMatch(p);
  }

  static String pad(String s, long width, String fill, int align) {
    int n = len(s);
    if (width <= n) {
      return s;
    }
    int total = (int) Math.min(width - n, Integer.MAX_VALUE / 2);
    int left;
    if (align < 0) {
      left = 0;
    } else if (align > 0) {
      left = total;
    } else {
      // CPython centers with the extra character on the left when the total is odd and the
      // width is odd (str.center uses left = total/2 + (total & width & 1)).
      left = total / 2 + (int) (total & width & 1);
    }
    return fill.repeat(left) + s + fill.repeat(total - left);
  }

  static String zfill(String s, long width) {
    int n = len(s);
    if (width <= n) {
      return s;
    }
    String zeros = "0".repeat((int) Math.min(width - n, Integer.MAX_VALUE / 2));
    if (!s.isEmpty() && (s.charAt(0) == '+' || s.charAt(0) == '-')) {
      return s.charAt(0) + zeros + s.substring(1);
    }
    return zeros + s;
  }

  static String expandtabs(String s, long tabsize) {
    StringBuilder sb = new StringBuilder();
    int col = 0;
    for (int i = 0; i < s.length(); ) {
      int cp = s.codePointAt(i);
      i += Character.charCount(cp);
      if (cp == '\t') {
        if (tabsize > 0) {
          int spaces = (int) (tabsize - (col % tabsize));
          sb.append(" ".repeat(spaces));
          col += spaces;
        }
      } else {
        sb.appendCodePoint(cp);
        col = (cp == '\n' || cp == '\r') ? 0 : col + 1;
      }
    }
    return sb.toString();
  }

  /** Code-point order, as Python compares strings (Java's compareTo orders UTF-16 units). */
  static int compare(String a, String b) {
    int i = 0;
    int j = 0;
    while (i < a.length() && j < b.length()) {
      int ca = a.codePointAt(i);
      int cb = b.codePointAt(j);
      if (ca != cb) {
        return Integer.compare(ca, cb);
      }
      i += Character.charCount(ca);
      j += Character.charCount(cb);
    }
    return Boolean.compare(i < a.length(), j < b.length());
  }
}
