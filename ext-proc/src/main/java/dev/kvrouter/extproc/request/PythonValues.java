package dev.kvrouter.extproc.request;

import java.math.BigInteger;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The value semantics vLLM applies to a request, so the router accepts and rejects what the engine does: Python
 * truthiness (vLLM's "before" validators test raw values with {@code and}/{@code not}) and pydantic v2's lax
 * boolean coercion (a {@code bool} field accepts {@code "yes"}, {@code 1}, {@code "off"}, ...). Verified against
 * pydantic by {@code scripts/fixtures/request_semantics.py}.
 */
final class PythonValues {

  private static final Set<String> TRUE_STRINGS = Set.of("1", "on", "t", "true", "y", "yes");
  private static final Set<String> FALSE_STRINGS = Set.of("0", "off", "f", "false", "n", "no");

  private PythonValues() {}

  /** Python's {@code bool(value)} for a value decoded from JSON. */
  static boolean truthy(Object v) {
    if (v == null) {
      return false;
    }
    if (v instanceof Boolean b) {
      return b;
    }
    if (v instanceof String s) {
      return !s.isEmpty();
    }
    if (v instanceof BigInteger b) {
      return b.signum() != 0;
    }
    if (v instanceof Double d) {
      return d != 0.0; // NaN is truthy in Python, and NaN != 0.0 holds
    }
    if (v instanceof Number n) {
      return n.longValue() != 0;
    }
    if (v instanceof List<?> l) {
      return !l.isEmpty();
    }
    if (v instanceof Map<?, ?> m) {
      return !m.isEmpty();
    }
    return true;
  }

  /**
   * Pydantic's lax {@code bool}: booleans, the integers 0 and 1 (and floats equal to them), and the strings
   * above in any case. Returns null when pydantic would reject the value (null included: the fields read this
   * way are declared {@code bool}, not {@code bool | None}).
   */
  static Boolean laxBool(Object v) {
    if (v instanceof Boolean b) {
      return b;
    }
    if (v instanceof Long l) {
      return l == 0 ? Boolean.FALSE : l == 1 ? Boolean.TRUE : null;
    }
    if (v instanceof Double d) {
      return d == 0.0 ? Boolean.FALSE : d == 1.0 ? Boolean.TRUE : null;
    }
    if (v instanceof String s) {
      String k = s.toLowerCase(Locale.ROOT);
      return TRUE_STRINGS.contains(k) ? Boolean.TRUE : FALSE_STRINGS.contains(k) ? Boolean.FALSE : null;
    }
    return null;
  }

  /** The strings pydantic's lax {@code int} reads: digits, single underscores between them, a zero fraction. */
  private static final Pattern INT_STRING = Pattern.compile("[+-]?[0-9]+(?:_[0-9]+)*(?:\\.0+)?");

  /** What pydantic-core trims from a number string (Rust's {@code str::trim}): Unicode White_Space at either end. */
  private static final Pattern RUST_TRIM = Pattern.compile("^\\p{IsWhite_Space}+|\\p{IsWhite_Space}+$");

  /** Rust's {@code f64::from_str}: digits with an optional point and exponent, or inf, infinity, nan in any case. */
  private static final Pattern RUST_FLOAT = Pattern.compile(
      "[+-]?(?:(?:[0-9]+\\.?[0-9]*|\\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf|infinity|nan))");

  /**
   * Underscores pydantic-core drops before a second attempt at a number string: none at either end, never two in
   * a row.
   */
  private static final Pattern SINGLE_UNDERSCORES = Pattern.compile("[^_]+(?:_[^_]+)*");

  private static String rustTrim(String s) {
    return RUST_TRIM.matcher(s).replaceAll("");
  }

  /**
   * Whether pydantic v2's lax {@code float} accepts the value: booleans, any JSON number Python's {@code float()}
   * can hold (NaN and infinities included; an integer past the double range is refused), and strings Rust's float
   * grammar reads once trimmed, or, untrimmed, once single underscores are dropped ({@code "1_0.5"},
   * {@code "in_f"}). Verified against pydantic by {@code scripts/fixtures/messages_validation.py}.
   */
  static boolean pydanticFloat(Object v) {
    if (v instanceof Boolean || v instanceof Long || v instanceof Double) {
      return true;
    }
    if (v instanceof BigInteger b) {
      return !Double.isInfinite(b.doubleValue()); // correctly rounded, as Python's int.__float__
    }
    if (v instanceof String s) {
      return RUST_FLOAT.matcher(rustTrim(s)).matches()
          || SINGLE_UNDERSCORES.matcher(s).matches() && RUST_FLOAT.matcher(s.replace("_", "")).matches();
    }
    return false;
  }

  /**
   * Pydantic v2's lax {@code int}, exactly, for a field whose value decides whether vLLM accepts the request: booleans,
   * integers of any size, integral floats under 2^63 in magnitude, and {@link #INT_STRING} strings with surrounding
   * Unicode White_Space. Returns null when pydantic would refuse the value (null included). Verified against pydantic
   * by {@code scripts/fixtures/messages_validation.py}.
   */
  static BigInteger pydanticInt(Object v) {
    if (v instanceof Boolean b) {
      return b ? BigInteger.ONE : BigInteger.ZERO;
    }
    if (v instanceof Long l) {
      return BigInteger.valueOf(l);
    }
    if (v instanceof BigInteger b) {
      return b;
    }
    if (v instanceof Double d) {
      return d == Math.rint(d) && Math.abs(d) < 0x1p63 ? BigInteger.valueOf(d.longValue()) : null;
    }
    if (v instanceof String s) {
      String t = rustTrim(s);
      if (!INT_STRING.matcher(t).matches()) {
        return null;
      }
      int dot = t.indexOf('.');
      return new BigInteger((dot < 0 ? t : t.substring(0, dot)).replace("_", ""));
    }
    return null;
  }

  /**
   * Pydantic's lax {@code int} for the hint fields the router only estimates with ({@code max_tokens}, {@code n},
   * ...): integers, integral floats and decimal strings. Returns null for anything else; the engine validates.
   */
  static Long laxLong(Object v) {
    if (v instanceof Long l) {
      return l;
    }
    if (v instanceof Double d && !d.isInfinite() && d == Math.rint(d) && Math.abs(d) < 9.0e18) {
      return d.longValue();
    }
    if (v instanceof String s) {
      try {
        return Long.parseLong(s.strip());
      } catch (NumberFormatException e) {
        return null;
      }
    }
    return null;
  }
}
