package dev.kvrouter.extproc.template.jinja;

import java.math.BigInteger;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/** Python's {@code str()} and {@code repr()} for interpreter values. */
public final class PyRepr {
  private PyRepr() {}

  /** {@code str(value)}: what {@code {{ value }}} prints. */
  public static String str(Object o) {
    if (o instanceof String s) {
      return s;
    }
    if (o instanceof Markup m) {
      return m.text;
    }
    if (o instanceof Undefined) {
      return "";
    }
    StringBuilder sb = new StringBuilder();
    appendStr(sb, o);
    return sb.toString();
  }

  static void appendStr(StringBuilder sb, Object o) {
    if (o instanceof String s) {
      sb.append(s);
    } else if (o instanceof Markup m) {
      sb.append(m.text);
    } else if (o instanceof Undefined) {
      // prints nothing
    } else {
      appendRepr(sb, o);
    }
  }

  /** {@code repr(value)}. */
  public static String repr(Object o) {
    StringBuilder sb = new StringBuilder();
    appendRepr(sb, o);
    return sb.toString();
  }

  /** {@code ascii(value)}: repr with every non-ASCII character backslash-escaped. */
  static String ascii(Object o) {
    String r = repr(o);
    if (r.chars().allMatch(c -> c < 128)) {
      return r;
    }
    StringBuilder sb = new StringBuilder(r.length() + 16);
    r.codePoints().forEach(cp -> {
      if (cp < 128) {
        sb.append((char) cp);
      } else if (cp <= 0xff) {
        sb.append(String.format("\\x%02x", cp));
      } else if (cp <= 0xffff) {
        sb.append(String.format("\\u%04x", cp));
      } else {
        sb.append(String.format("\\U%08x", cp));
      }
    });
    return sb.toString();
  }

  static void appendRepr(StringBuilder sb, Object o) {
    if (o == null) {
      sb.append("None");
    } else if (o instanceof Boolean b) {
      sb.append(b ? "True" : "False");
    } else if (o instanceof Long || o instanceof BigInteger) {
      sb.append(o);
    } else if (o instanceof Double d) {
      sb.append(PyFloat.repr(d));
    } else if (o instanceof String s) {
      appendStrRepr(sb, s);
    } else if (o instanceof Markup m) {
      sb.append("Markup(");
      appendStrRepr(sb, m.text);
      sb.append(')');
    } else if (o instanceof List<?> l) {
      sb.append('[');
      appendItems(sb, l.iterator());
      sb.append(']');
    } else if (o instanceof PyTuple t) {
      sb.append('(');
      appendItems(sb, t.items().iterator());
      if (t.size() == 1) {
        sb.append(',');
      }
      sb.append(')');
    } else if (o instanceof Map<?, ?> m) {
      appendDict(sb, m);
    } else if (o instanceof Undefined) {
      sb.append("Undefined");
    } else if (o instanceof Namespace ns) {
      sb.append("<Namespace ");
      appendDict(sb, ns.attrs);
      sb.append('>');
    } else if (o instanceof DictView v) {
      sb.append(v.typeName()).append("([");
      appendItems(sb, PyOps.iterate(v));
      sb.append("])");
    } else if (o instanceof PyRange r) {
      sb.append("range(").append(r.start()).append(", ").append(r.stop());
      if (r.step() != 1) {
        sb.append(", ").append(r.step());
      }
      sb.append(')');
    } else if (o instanceof LoopContext lc) {
      sb.append("<LoopContext ").append(lc.index0 + 1).append('/').append(lc.length()).append('>');
    } else if (o instanceof MacroValue mv) {
      sb.append("<Macro '").append(mv.name()).append("'>");
    } else {
      // Python prints generators, bound methods and functions with a memory address, which no
      // other implementation can reproduce: refuse rather than emit a prompt that cannot match.
      throw JinjaError.type("cannot render a value of type '" + PyTypes.typeName(o)
          + "' (Python would print a memory address)");
    }
  }

  private static void appendItems(StringBuilder sb, Iterator<?> it) {
    boolean first = true;
    while (it.hasNext()) {
      if (!first) {
        sb.append(", ");
      }
      first = false;
      appendRepr(sb, it.next());
    }
  }

  private static void appendDict(StringBuilder sb, Map<?, ?> m) {
    sb.append('{');
    boolean first = true;
    for (Map.Entry<?, ?> e : m.entrySet()) {
      if (!first) {
        sb.append(", ");
      }
      first = false;
      appendRepr(sb, e.getKey());
      sb.append(": ");
      appendRepr(sb, e.getValue());
    }
    sb.append('}');
  }

  /** Python's str repr: quote choice, escapes, and printable-character rules. */
  static void appendStrRepr(StringBuilder sb, String s) {
    char quote = (s.indexOf('\'') >= 0 && s.indexOf('"') < 0) ? '"' : '\'';
    sb.append(quote);
    for (int i = 0; i < s.length(); ) {
      int cp = s.codePointAt(i);
      i += Character.charCount(cp);
      if (cp == quote || cp == '\\') {
        sb.append('\\').appendCodePoint(cp);
      } else if (cp == '\t') {
        sb.append("\\t");
      } else if (cp == '\n') {
        sb.append("\\n");
      } else if (cp == '\r') {
        sb.append("\\r");
      } else if (cp < 0x20 || cp == 0x7f) {
        hex(sb, "\\x", cp, 2);
      } else if (cp < 0x7f) {
        sb.append((char) cp);
      } else if (isPrintable(cp)) {
        sb.appendCodePoint(cp);
      } else if (cp <= 0xff) {
        hex(sb, "\\x", cp, 2);
      } else if (cp <= 0xffff) {
        hex(sb, "\\u", cp, 4);
      } else {
        hex(sb, "\\U", cp, 8);
      }
    }
    sb.append(quote);
  }

  private static void hex(StringBuilder sb, String prefix, int cp, int width) {
    String h = Integer.toHexString(cp);
    sb.append(prefix).append("0".repeat(Math.max(0, width - h.length()))).append(h);
  }

  /** Python's str.isprintable for one non-ASCII code point. */
  static boolean isPrintable(int cp) {
    int t = Character.getType(cp);
    return switch (t) {
      case Character.CONTROL, Character.FORMAT, Character.SURROGATE, Character.PRIVATE_USE,
          Character.UNASSIGNED, Character.LINE_SEPARATOR, Character.PARAGRAPH_SEPARATOR,
          Character.SPACE_SEPARATOR -> false;
      default -> true;
    };
  }
}
