package dev.kvrouter.extproc.template.jinja;

import java.time.LocalDateTime;
import java.time.format.TextStyle;
import java.util.Locale;

/**
 * C-locale {@code strftime} as Python's {@code datetime.strftime} produces it on glibc, for
 * naive local times (transformers calls {@code datetime.now().strftime(fmt)}). Supports the
 * glibc {@code %-d} style flags that templates use.
 */
final class Strftime {
  private Strftime() {}

  static String format(String fmt, LocalDateTime t) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < fmt.length(); i++) {
      char c = fmt.charAt(i);
      if (c != '%' || i + 1 >= fmt.length()) {
        sb.append(c);
        continue;
      }
      char d = fmt.charAt(++i);
      boolean noPad = false;
      if ((d == '-' || d == '_') && i + 1 < fmt.length()) {
        noPad = d == '-';
        d = fmt.charAt(++i);
      }
      int hour12 = t.getHour() % 12 == 0 ? 12 : t.getHour() % 12;
      switch (d) {
        case 'Y' -> sb.append(t.getYear());
        case 'y' -> num(sb, t.getYear() % 100, 2, noPad);
        case 'm' -> num(sb, t.getMonthValue(), 2, noPad);
        case 'd' -> num(sb, t.getDayOfMonth(), 2, noPad);
        case 'e' -> sb.append(noPad ? String.valueOf(t.getDayOfMonth()) : String.format("%2d", t.getDayOfMonth()));
        case 'H' -> num(sb, t.getHour(), 2, noPad);
        case 'I' -> num(sb, hour12, 2, noPad);
        case 'M' -> num(sb, t.getMinute(), 2, noPad);
        case 'S' -> num(sb, t.getSecond(), 2, noPad);
        case 'f' -> num(sb, t.getNano() / 1000, 6, false);
        case 'j' -> num(sb, t.getDayOfYear(), 3, noPad);
        case 'p' -> sb.append(t.getHour() < 12 ? "AM" : "PM");
        case 'b', 'h' -> sb.append(t.getMonth().getDisplayName(TextStyle.SHORT, Locale.US));
        case 'B' -> sb.append(t.getMonth().getDisplayName(TextStyle.FULL, Locale.US));
        case 'a' -> sb.append(t.getDayOfWeek().getDisplayName(TextStyle.SHORT, Locale.US));
        case 'A' -> sb.append(t.getDayOfWeek().getDisplayName(TextStyle.FULL, Locale.US));
        case 'w' -> sb.append(t.getDayOfWeek().getValue() % 7);
        case 'u' -> sb.append(t.getDayOfWeek().getValue());
        case 'D' -> sb.append(format("%m/%d/%y", t));
        case 'F' -> sb.append(format("%Y-%m-%d", t));
        case 'T' -> sb.append(format("%H:%M:%S", t));
        case 'R' -> sb.append(format("%H:%M", t));
        case 'c' -> sb.append(format("%a %b %e %H:%M:%S %Y", t));
        case 'x' -> sb.append(format("%m/%d/%y", t));
        case 'X' -> sb.append(format("%H:%M:%S", t));
        case 'n' -> sb.append('\n');
        case 't' -> sb.append('\t');
        case 'z', 'Z' -> { } // naive datetime: empty, as in Python
        case '%' -> sb.append('%');
        default -> throw JinjaError.value("strftime directive '%" + d + "' is not supported");
      }
    }
    return sb.toString();
  }

  private static void num(StringBuilder sb, int v, int width, boolean noPad) {
    String s = Integer.toString(v);
    if (!noPad) {
      for (int i = s.length(); i < width; i++) {
        sb.append('0');
      }
    }
    sb.append(s);
  }
}
