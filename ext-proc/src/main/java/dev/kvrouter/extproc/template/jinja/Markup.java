package dev.kvrouter.extproc.template.jinja;

/**
 * markupsafe's {@code Markup}: a string marked safe (the {@code safe} and {@code escape} filters
 * produce it). Chat templates run without autoescape, so it mostly prints like a plain string, but
 * {@code +} with a plain string escapes the plain side, as in Python.
 */
final class Markup {
  final String text;

  Markup(String text) {
    this.text = text;
  }

  /** markupsafe.escape of a plain string. */
  static String escape(String s) {
    StringBuilder sb = null;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      String rep = switch (c) {
        case '&' -> "&amp;";
        case '<' -> "&lt;";
        case '>' -> "&gt;";
        case '\'' -> "&#39;";
        case '"' -> "&#34;";
        default -> null;
      };
      if (rep != null) {
        if (sb == null) {
          sb = new StringBuilder(s.length() + 16).append(s, 0, i);
        }
        sb.append(rep);
      } else if (sb != null) {
        sb.append(c);
      }
    }
    return sb == null ? s : sb.toString();
  }

  /** Escape unless already markup, as markupsafe.escape does. */
  static Markup escapeValue(Object v) {
    if (v instanceof Markup m) {
      return m;
    }
    return new Markup(escape(PyRepr.str(v)));
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Markup m && m.text.equals(text);
  }

  @Override
  public int hashCode() {
    return text.hashCode();
  }

  @Override
  public String toString() {
    return text;
  }
}
