package dev.kvrouter.extproc.template.jinja;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;

/**
 * Python's {@code repr(float)}: the shortest decimal that reads back as the same double, in
 * fixed notation for exponents -4..16 and scientific notation otherwise ({@code 1e+16},
 * {@code 1e-05}). json.dumps prints floats the same way.
 */
final class PyFloat {
  private PyFloat() {}

  static String repr(double d) {
    if (Double.isNaN(d)) {
      return "nan";
    }
    if (Double.isInfinite(d)) {
      return d > 0 ? "inf" : "-inf";
    }
    if (d == 0) {
      return (1 / d < 0) ? "-0.0" : "0.0";
    }
    BigDecimal exact = new BigDecimal(d);
    BigDecimal shortest = null;
    for (int p = 1; p <= 17; p++) {
      BigDecimal r = exact.round(new MathContext(p, RoundingMode.HALF_EVEN));
      if (r.doubleValue() == d) {
        shortest = r;
        break;
      }
    }
    if (shortest == null) {
      shortest = exact.round(new MathContext(17, RoundingMode.HALF_EVEN));
    }
    shortest = shortest.stripTrailingZeros();
    String digits = shortest.unscaledValue().abs().toString();
    // value = 0.digits * 10^decpt
    int decpt = digits.length() - shortest.scale();
    StringBuilder sb = new StringBuilder(24);
    if (d < 0) {
      sb.append('-');
    }
    if (decpt <= -4 || decpt > 16) {
      sb.append(digits.charAt(0));
      if (digits.length() > 1) {
        sb.append('.').append(digits, 1, digits.length());
      }
      int exp = decpt - 1;
      sb.append('e').append(exp < 0 ? '-' : '+');
      int a = Math.abs(exp);
      if (a < 10) {
        sb.append('0');
      }
      sb.append(a);
    } else if (decpt <= 0) {
      sb.append("0.");
      sb.append("0".repeat(-decpt));
      sb.append(digits);
    } else if (decpt >= digits.length()) {
      sb.append(digits).append("0".repeat(decpt - digits.length())).append(".0");
    } else {
      sb.append(digits, 0, decpt).append('.').append(digits, decpt, digits.length());
    }
    return sb.toString();
  }
}
