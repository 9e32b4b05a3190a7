package dev.kvrouter.extproc.template.jinja;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;
import java.util.List;
import java.util.Map;

/**
 * Python string formatting: printf-style {@code "%s" % x} (also behind the {@code format}
 * filter) and {@code str.format}. Floats round the exact binary value half-to-even, as CPython
 * does, which Java's Formatter does not.
 */
final class PyFormat {
  private PyFormat() {}

  // ---- printf-style ----------------------------------------------------------------------------

  static Object percent(Object fmtValue, Object args) {
    String fmt = PyTypes.str(fmtValue);
    List<Object> positional;
    Map<?, ?> mapping = null;
    // CPython treats any non-tuple, non-str argument with __getitem__ as the mapping: %(key)s looks
    // keys up in it and the "not all arguments converted" check is skipped.
    boolean mappingArg = false;
    if (args instanceof PyTuple t) {
      positional = t.items();
    } else {
      positional = List.of(args == null ? NONE : args);
      if (args instanceof Map<?, ?> m) {
        mapping = m;
      }
      mappingArg = args instanceof Map || args instanceof List || args instanceof PyRange || args instanceof Undefined;
    }
    StringBuilder out = new StringBuilder(fmt.length() + 16);
    int argi = 0;
    boolean usedMapping = false;
    int n = fmt.length();
    for (int i = 0; i < n; i++) {
      char c = fmt.charAt(i);
      if (c != '%') {
        out.append(c);
        continue;
      }
      if (++i >= n) {
        throw JinjaError.value("incomplete format");
      }
      Object arg = null;
      boolean haveArg = false;
      if (fmt.charAt(i) == '(') {
        if (args instanceof Undefined u) {
          throw u.fail();
        }
        if (mappingArg && mapping == null) {
          throw JinjaError.type(PyTypes.typeName(args) + " indices must be integers or slices, not str");
        }
        if (mapping == null) {
          throw JinjaError.type("format requires a mapping");
        }
        int depth = 1;
        int j = i + 1;
        while (j < n && depth > 0) {
          if (fmt.charAt(j) == '(') {
            depth++;
          } else if (fmt.charAt(j) == ')') {
            depth--;
          }
          j++;
        }
        if (depth > 0) {
          throw JinjaError.value("incomplete format key");
        }
        String key = fmt.substring(i + 1, j - 1);
        if (!PyOps.containsKey(mapping, key)) {
          throw new JinjaError("KeyError", "format key not found");
        }
        arg = PyOps.dictGet(mapping, key);
        haveArg = true;
        usedMapping = true;
        i = j;
      }
      String flags = "";
      while (i < n && "-+ #0".indexOf(fmt.charAt(i)) >= 0) {
        flags += fmt.charAt(i++);
      }
      int width = -1;
      if (i < n && fmt.charAt(i) == '*') {
        width = (int) PyOps.toIndex(positional.get(argi++));
        if (width < 0) {
          flags += '-';
          width = -width;
        }
        i++;
      } else {
        int start = i;
        while (i < n && Character.isDigit(fmt.charAt(i))) {
          i++;
        }
        if (i > start) {
          width = Integer.parseInt(fmt.substring(start, i));
        }
      }
      int prec = -1;
      if (i < n && fmt.charAt(i) == '.') {
        i++;
        if (i < n && fmt.charAt(i) == '*') {
          prec = (int) PyOps.toIndex(positional.get(argi++));
          i++;
        } else {
          int start = i;
          while (i < n && Character.isDigit(fmt.charAt(i))) {
            i++;
          }
          prec = i > start ? Integer.parseInt(fmt.substring(start, i)) : 0;
        }
      }
      while (i < n && "hlL".indexOf(fmt.charAt(i)) >= 0) {
        i++;
      }
      if (i >= n) {
        throw JinjaError.value("incomplete format");
      }
      char conv = fmt.charAt(i);
      if (conv == '%') {
        out.append('%');
        continue;
      }
      if (!haveArg) {
        if (argi >= positional.size()) {
          throw JinjaError.type("not enough arguments for format string");
        }
        arg = positional.get(argi++);
        if (arg == NONE) {
          arg = null;
        }
      }
      out.append(convert(arg, conv, flags, width, prec));
    }
    if (argi < positional.size() && !usedMapping && !mappingArg) {
      throw JinjaError.type("not all arguments converted during string formatting");
    }
    return fmtValue instanceof Markup ? new Markup(out.toString()) : out.toString();
  }

  private static final Object NONE = new Object();

  private static String convert(Object arg, char conv, String flags, int width, int prec) {
    String body;
    boolean numeric = false;
    switch (conv) {
      case 's', 'r', 'a' -> {
        body = conv == 's' ? PyRepr.str(arg) : conv == 'r' ? PyRepr.repr(arg) : PyRepr.ascii(arg);
        if (prec >= 0 && PyStr.len(body) > prec) {
          body = body.substring(0, PyStr.offset(body, prec));
        }
      }
      case 'd', 'i', 'u' -> {
        numeric = true;
        body = signed(intValue(arg, conv).toString(), flags);
      }
      case 'x', 'X', 'o' -> {
        numeric = true;
        BigInteger v = intValue(arg, conv);
        String digits = v.abs().toString(conv == 'o' ? 8 : 16);
        if (conv == 'X') {
          digits = digits.toUpperCase();
        }
        if (flags.indexOf('#') >= 0) {
          digits = (conv == 'o' ? "0o" : conv == 'x' ? "0x" : "0X") + digits;
        }
        body = signed((v.signum() < 0 ? "-" : "") + digits, flags);
      }
      case 'e', 'E', 'f', 'F', 'g', 'G' -> {
        numeric = true;
        body = signed(formatFloat(floatValue(arg, conv), conv, prec < 0 ? 6 : prec, flags.indexOf('#') >= 0),
            flags);
      }
      case 'c' -> {
        if (PyTypes.isStr(arg) && PyStr.len(PyTypes.str(arg)) == 1) {
          body = PyTypes.str(arg);
        } else if (PyTypes.isInt(arg)) {
          body = new String(Character.toChars((int) PyOps.toIndex(arg)));
        } else {
          throw JinjaError.type("%c requires int or char");
        }
      }
      default -> throw JinjaError.value("unsupported format character '" + conv + "'");
    }
    if (width > PyStr.len(body)) {
      int pad = width - PyStr.len(body);
      if (flags.indexOf('-') >= 0) {
        return body + " ".repeat(pad);
      }
      if (numeric && flags.indexOf('0') >= 0) {
        int signLen = (!body.isEmpty() && "+- ".indexOf(body.charAt(0)) >= 0) ? 1 : 0;
        if (body.startsWith("0x", signLen) || body.startsWith("0X", signLen) || body.startsWith("0o", signLen)) {
          signLen += 2;
        }
        return body.substring(0, signLen) + "0".repeat(pad) + body.substring(signLen);
      }
      return " ".repeat(pad) + body;
    }
    return body;
  }

  private static String signed(String s, String flags) {
    if (!s.startsWith("-")) {
      if (flags.indexOf('+') >= 0) {
        return "+" + s;
      }
      if (flags.indexOf(' ') >= 0) {
        return " " + s;
      }
    }
    return s;
  }

  private static BigInteger intValue(Object arg, char conv) {
    if (PyTypes.isInt(arg)) {
      return PyOps.big(arg);
    }
    if (arg instanceof Double d) {
      if (Double.isNaN(d) || Double.isInfinite(d)) {
        throw new JinjaError("OverflowError", "cannot convert float to integer");
      }
      return new BigDecimal(d).toBigInteger();
    }
    if (arg instanceof Undefined u) {
      if ("xXo".indexOf(conv) >= 0) {
        throw JinjaError.type("%" + conv + " format: an integer is required, not Undefined");
      }
      throw u.fail();
    }
    throw JinjaError.type("%" + conv + " format: a real number is required, not " + PyTypes.typeName(arg));
  }

  private static double floatValue(Object arg, char conv) {
    if (PyTypes.isNumber(arg)) {
      return PyOps.dbl(arg);
    }
    if (arg instanceof Undefined u) {
      throw u.fail();
    }
    throw JinjaError.type("must be real number, not " + PyTypes.typeName(arg));
  }

  /** CPython float formatting for e/f/g with correct half-even rounding of the exact value. */
  static String formatFloat(double d, char conv, int prec, boolean alt) {
    boolean upper = Character.isUpperCase(conv);
    if (Double.isNaN(d)) {
      return upper ? "NAN" : "nan";
    }
    if (Double.isInfinite(d)) {
      return (d < 0 ? "-" : "") + (upper ? "INF" : "inf");
    }
    boolean neg = d < 0 || (d == 0 && 1 / d < 0);
    BigDecimal v = new BigDecimal(Math.abs(d));
    String body;
    char lc = Character.toLowerCase(conv);
    if (lc == 'f') {
      body = v.setScale(prec, RoundingMode.HALF_EVEN).toPlainString();
      if (alt && prec == 0) {
        body += ".";
      }
    } else if (lc == 'e') {
      body = exp(v, prec, alt);
    } else {
      int p = prec == 0 ? 1 : prec;
      int x;
      if (v.signum() == 0) {
        x = 0;
      } else {
        BigDecimal r = v.round(new MathContext(p, RoundingMode.HALF_EVEN));
        x = r.precision() - r.scale() - 1;
      }
      if (x >= -4 && x < p) {
        body = v.setScale(p - 1 - x, RoundingMode.HALF_EVEN).toPlainString();
      } else {
        body = exp(v, p - 1, alt);
      }
      if (!alt) {
        body = stripZeros(body);
      } else if (body.indexOf('.') < 0 && body.indexOf('e') < 0) {
        body += ".";
      }
    }
    if (upper) {
      body = body.toUpperCase();
    }
    return (neg ? "-" : "") + body;
  }

  private static String exp(BigDecimal v, int prec, boolean alt) {
    int x;
    String digits;
    if (v.signum() == 0) {
      x = 0;
      digits = "0".repeat(prec + 1);
    } else {
      BigDecimal r = v.round(new MathContext(prec + 1, RoundingMode.HALF_EVEN));
      x = r.precision() - r.scale() - 1;
      digits = r.unscaledValue().toString();
      if (digits.length() < prec + 1) {
        digits = digits + "0".repeat(prec + 1 - digits.length());
      }
      digits = digits.substring(0, prec + 1);
    }
    StringBuilder sb = new StringBuilder();
    sb.append(digits.charAt(0));
    if (prec > 0 || alt) {
      sb.append('.');
    }
    sb.append(digits, 1, digits.length());
    sb.append('e').append(x < 0 ? '-' : '+');
    if (Math.abs(x) < 10) {
      sb.append('0');
    }
    sb.append(Math.abs(x));
    return sb.toString();
  }

  private static String stripZeros(String body) {
    int e = body.indexOf('e');
    String mant = e < 0 ? body : body.substring(0, e);
    String rest = e < 0 ? "" : body.substring(e);
    if (mant.indexOf('.') >= 0) {
      mant = mant.replaceAll("0+$", "");
      if (mant.endsWith(".")) {
        mant = mant.substring(0, mant.length() - 1);
      }
    }
    return mant + rest;
  }

  // ---- str.format ------------------------------------------------------------------------------

  static String strFormat(String fmt, List<Object> args, Map<String, Object> kwargs) {
    StringBuilder out = new StringBuilder(fmt.length() + 16);
    int auto = 0;
    boolean manual = false;
    int n = fmt.length();
    for (int i = 0; i < n; i++) {
      char c = fmt.charAt(i);
      if (c == '}') {
        if (i + 1 < n && fmt.charAt(i + 1) == '}') {
          out.append('}');
          i++;
          continue;
        }
        throw JinjaError.value("Single '}' encountered in format string");
      }
      if (c != '{') {
        out.append(c);
        continue;
      }
      if (i + 1 < n && fmt.charAt(i + 1) == '{') {
        out.append('{');
        i++;
        continue;
      }
      int depth = 1;
      int j = i + 1;
      while (j < n && depth > 0) {
        char cj = fmt.charAt(j);
        if (cj == '{') {
          depth++;
        } else if (cj == '}') {
          depth--;
        }
        j++;
      }
      if (depth > 0) {
        throw JinjaError.value("expected '}' before end of string");
      }
      String field = fmt.substring(i + 1, j - 1);
      i = j - 1;
      String spec = "";
      char conversion = 0;
      int colon = indexOutsideBrackets(field, ':');
      if (colon >= 0) {
        spec = field.substring(colon + 1);
        field = field.substring(0, colon);
      }
      int bang = indexOutsideBrackets(field, '!');
      if (bang >= 0) {
        if (bang + 2 != field.length()) {
          throw JinjaError.value("expected ':' after conversion specifier");
        }
        conversion = field.charAt(bang + 1);
        field = field.substring(0, bang);
      }
      int end = 0;
      while (end < field.length() && field.charAt(end) != '.' && field.charAt(end) != '[') {
        end++;
      }
      String first = field.substring(0, end);
      Object value;
      if (first.isEmpty()) {
        if (manual) {
          throw JinjaError.value("cannot switch from manual field specification to automatic field numbering");
        }
        if (auto >= args.size()) {
          throw new JinjaError("IndexError", "Replacement index " + auto + " out of range for positional args tuple");
        }
        value = args.get(auto++);
      } else if (first.chars().allMatch(Character::isDigit)) {
        if (auto > 0) {
          throw JinjaError.value("cannot switch from automatic field numbering to manual field specification");
        }
        manual = true;
        int idx = Integer.parseInt(first);
        if (idx >= args.size()) {
          throw new JinjaError("IndexError", "Replacement index " + idx + " out of range for positional args tuple");
        }
        value = args.get(idx);
      } else {
        if (!kwargs.containsKey(first)) {
          throw new JinjaError("KeyError", "'" + first + "'");
        }
        value = kwargs.get(first);
      }
      int k = end;
      while (k < field.length()) {
        if (field.charAt(k) == '.') {
          int s = ++k;
          while (k < field.length() && field.charAt(k) != '.' && field.charAt(k) != '[') {
            k++;
          }
          value = PyOps.getattr(value, field.substring(s, k));
        } else {
          int close = field.indexOf(']', k);
          String key = field.substring(k + 1, close);
          Object keyObj = !key.isEmpty() && key.chars().allMatch(Character::isDigit) ? (Object) Long.parseLong(key) : key;
          value = PyOps.getitem(value, keyObj, true);
          k = close + 1;
        }
      }
      if (conversion == 'r') {
        value = PyRepr.repr(value);
      } else if (conversion == 'a') {
        value = PyRepr.ascii(value);
      } else if (conversion == 's') {
        value = PyRepr.str(value);
      } else if (conversion != 0) {
        throw JinjaError.value("Unknown conversion specifier " + conversion);
      }
      if (spec.indexOf('{') >= 0) {
        spec = strFormat(spec, args, kwargs);
      }
      out.append(formatSpec(value, spec));
    }
    return out.toString();
  }

  private static int indexOutsideBrackets(String s, char c) {
    int depth = 0;
    for (int i = 0; i < s.length(); i++) {
      char x = s.charAt(i);
      if (x == '[') {
        depth++;
      } else if (x == ']') {
        depth--;
      } else if (x == c && depth == 0) {
        return i;
      }
    }
    return -1;
  }

  /** Python's {@code format(value, spec)} for str, int and float values. */
  static String formatSpec(Object value, String spec) {
    if (spec.isEmpty()) {
      return PyRepr.str(value);
    }
    int i = 0;
    char fill = ' ';
    char align = 0;
    boolean fillGiven = false;
    if (spec.length() >= 2 && "<>=^".indexOf(spec.charAt(1)) >= 0) {
      fillGiven = true;
      fill = spec.charAt(0);
      align = spec.charAt(1);
      i = 2;
    } else if ("<>=^".indexOf(spec.charAt(0)) >= 0) {
      align = spec.charAt(0);
      i = 1;
    }
    char sign = 0;
    if (i < spec.length() && "+- ".indexOf(spec.charAt(i)) >= 0) {
      sign = spec.charAt(i++);
    }
    boolean alt = false;
    if (i < spec.length() && spec.charAt(i) == '#') {
      alt = true;
      i++;
    }
    if (i < spec.length() && spec.charAt(i) == '0') {
      // CPython: a leading 0 sets the fill unless one was given; '=' only for right-aligned (numeric) defaults
      if (!fillGiven) {
        fill = '0';
        if (align == 0 && !PyTypes.isStr(value)) {
          align = '=';
        }
      }
      i++;
    }
    int ws = i;
    while (i < spec.length() && Character.isDigit(spec.charAt(i))) {
      i++;
    }
    int width = i > ws ? Integer.parseInt(spec.substring(ws, i)) : -1;
    char grouping = 0;
    if (i < spec.length() && (spec.charAt(i) == ',' || spec.charAt(i) == '_')) {
      grouping = spec.charAt(i++);
    }
    int prec = -1;
    if (i < spec.length() && spec.charAt(i) == '.') {
      int ps = ++i;
      while (i < spec.length() && Character.isDigit(spec.charAt(i))) {
        i++;
      }
      prec = Integer.parseInt(spec.substring(ps, i));
    }
    char type = i < spec.length() ? spec.charAt(i++) : 0;
    if (i != spec.length()) {
      throw JinjaError.value("Invalid format specifier");
    }
    String body;
    boolean numeric;
    if (PyTypes.isStr(value) && (type == 0 || type == 's')) {
      body = PyTypes.str(value);
      if (prec >= 0 && PyStr.len(body) > prec) {
        body = body.substring(0, PyStr.offset(body, prec));
      }
      numeric = false;
      if (align == 0) {
        align = '<';
      }
    } else if (PyTypes.isInt(value) && !(value instanceof Boolean && type == 0) && "bcdoxXn".indexOf(type == 0 ? 'd' : type) >= 0) {
      BigInteger v = PyOps.big(value);
      char t = type == 0 ? 'd' : type;
      String digits = switch (t) {
        case 'b' -> v.abs().toString(2);
        case 'o' -> v.abs().toString(8);
        case 'x' -> v.abs().toString(16);
        case 'X' -> v.abs().toString(16).toUpperCase();
        case 'c' -> new String(Character.toChars(v.intValue()));
        default -> v.abs().toString();
      };
      if (grouping != 0 && (t == 'd' || t == 'n')) {
        digits = group(digits, grouping);
      }
      if (alt && t != 'd' && t != 'c') {
        digits = "0" + t + digits;
      }
      body = (v.signum() < 0 ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "") + digits;
      numeric = true;
    } else if (PyTypes.isNumber(value) && (type == 0 || "eEfFgG%".indexOf(type) >= 0)) {
      double d = PyOps.dbl(value);
      String s;
      if (type == '%') {
        s = formatFloat(d * 100, 'f', prec < 0 ? 6 : prec, alt) + "%";
      } else if (type == 0) {
        s = prec < 0 ? PyFloat.repr(d) : formatFloat(d, 'g', prec, alt);
      } else {
        s = formatFloat(d, type, prec < 0 ? 6 : prec, alt);
      }
      boolean neg = s.startsWith("-");
      String digits = neg ? s.substring(1) : s;
      if (grouping != 0) {
        int dot = digits.indexOf('.');
        int e = dot >= 0 ? dot : digits.length();
        digits = group(digits.substring(0, e), grouping) + digits.substring(e);
      }
      body = (neg ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "") + digits;
      numeric = true;
    } else {
      throw JinjaError.type("unsupported format string passed to " + PyTypes.typeName(value) + ".__format__");
    }
    if (align == 0) {
      align = numeric ? '>' : '<';
    }
    int len = PyStr.len(body);
    if (width <= len) {
      return body;
    }
    int pad = width - len;
    String f = String.valueOf(fill);
    return switch (align) {
      case '<' -> body + f.repeat(pad);
      case '^' -> f.repeat(pad / 2) + body + f.repeat(pad - pad / 2);
      case '=' -> {
        int signLen = !body.isEmpty() && "+- ".indexOf(body.charAt(0)) >= 0 ? 1 : 0;
        yield body.substring(0, signLen) + f.repeat(pad) + body.substring(signLen);
      }
      default -> f.repeat(pad) + body;
    };
  }

  private static String group(String digits, char sep) {
    StringBuilder sb = new StringBuilder();
    int n = digits.length();
    for (int i = 0; i < n; i++) {
      if (i > 0 && (n - i) % 3 == 0) {
        sb.append(sep);
      }
      sb.append(digits.charAt(i));
    }
    return sb.toString();
  }
}
