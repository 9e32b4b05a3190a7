package dev.kvrouter.extproc.template.jinja;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * Python's {@code json.dumps}, as transformers' {@code tojson} filter calls it:
 * {@code json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)}, so no
 * HTML escaping, non-ASCII kept, keys in insertion order. All five options are honoured.
 */
final class JsonDumps {
  private JsonDumps() {}

  record Options(boolean ensureAscii, String indent, String itemSeparator, String keySeparator, boolean sortKeys) {}

  static Options options(Object ensureAscii, Object indent, Object separators, Object sortKeys) {
    String ind = null;
    if (indent != null) {
      if (PyTypes.isStr(indent)) {
        ind = PyTypes.str(indent);
      } else if (PyTypes.isInt(indent)) {
        long n = PyOps.toIndex(indent);
        ind = " ".repeat((int) Math.max(0, Math.min(n, 1024)));
      } else {
        throw JinjaError.type("can't multiply sequence by non-int of type '" + PyTypes.typeName(indent) + "'");
      }
    }
    String item = ind == null ? ", " : ",";
    String key = ": ";
    if (separators != null) {
      List<Object> parts = new ArrayList<>();
      PyOps.iterate(separators).forEachRemaining(parts::add);
      if (parts.size() != 2) {
        throw JinjaError.value("too many values to unpack (expected 2)");
      }
      item = PyRepr.str(parts.get(0));
      key = PyRepr.str(parts.get(1));
    }
    return new Options(PyOps.truthy(ensureAscii), ind, item, key, PyOps.truthy(sortKeys));
  }

  static final Options DEFAULT = new Options(false, null, ", ", ": ", false);

  static String dumps(Object value, Options opt) {
    StringBuilder sb = new StringBuilder();
    encode(sb, value, opt, 0);
    return sb.toString();
  }

  private static void newline(StringBuilder sb, Options opt, int level) {
    sb.append('\n');
    for (int i = 0; i < level; i++) {
      sb.append(opt.indent());
    }
  }

  private static void encode(StringBuilder sb, Object o, Options opt, int level) {
    if (o == null) {
      sb.append("null");
    } else if (o instanceof Boolean b) {
      sb.append(b ? "true" : "false");
    } else if (o instanceof Long || o instanceof BigInteger) {
      sb.append(o);
    } else if (o instanceof Double d) {
      sb.append(floatStr(d));
    } else if (PyTypes.isStr(o)) {
      string(sb, PyTypes.str(o), opt.ensureAscii());
    } else if (o instanceof List<?> l) {
      array(sb, l.iterator(), l.isEmpty(), opt, level);
    } else if (o instanceof PyTuple t) {
      array(sb, t.items().iterator(), t.items().isEmpty(), opt, level);
    } else if (o instanceof Map<?, ?> m) {
      object(sb, m, opt, level);
    } else {
      throw JinjaError.type("Object of type " + PyTypes.typeName(o) + " is not JSON serializable");
    }
  }

  private static void array(StringBuilder sb, Iterator<?> it, boolean empty, Options opt, int level) {
    if (empty) {
      sb.append("[]");
      return;
    }
    sb.append('[');
    boolean first = true;
    while (it.hasNext()) {
      if (!first) {
        sb.append(opt.itemSeparator());
      }
      if (opt.indent() != null) {
        newline(sb, opt, level + 1);
      }
      first = false;
      encode(sb, it.next(), opt, level + 1);
    }
    if (opt.indent() != null) {
      newline(sb, opt, level);
    }
    sb.append(']');
  }

  private static void object(StringBuilder sb, Map<?, ?> m, Options opt, int level) {
    if (m.isEmpty()) {
      sb.append("{}");
      return;
    }
    List<Map.Entry<?, ?>> entries = new ArrayList<>(m.entrySet());
    if (opt.sortKeys()) {
      entries.sort((a, b) -> PyOps.compare3(a.getKey(), b.getKey()));
    }
    sb.append('{');
    boolean first = true;
    for (Map.Entry<?, ?> e : entries) {
      if (!first) {
        sb.append(opt.itemSeparator());
      }
      if (opt.indent() != null) {
        newline(sb, opt, level + 1);
      }
      first = false;
      string(sb, key(e.getKey()), opt.ensureAscii());
      sb.append(opt.keySeparator());
      encode(sb, e.getValue(), opt, level + 1);
    }
    if (opt.indent() != null) {
      newline(sb, opt, level);
    }
    sb.append('}');
  }

  private static String key(Object k) {
    if (PyTypes.isStr(k)) {
      return PyTypes.str(k);
    }
    if (k == null) {
      return "null";
    }
    if (k instanceof Boolean b) {
      return b ? "true" : "false";
    }
    if (k instanceof Long || k instanceof BigInteger) {
      return k.toString();
    }
    if (k instanceof Double d) {
      return floatStr(d);
    }
    throw JinjaError.type("keys must be str, int, float, bool or None, not " + PyTypes.typeName(k));
  }

  static String floatStr(double d) {
    if (Double.isNaN(d)) {
      return "NaN";
    }
    if (Double.isInfinite(d)) {
      return d > 0 ? "Infinity" : "-Infinity";
    }
    return PyFloat.repr(d);
  }

  static void string(StringBuilder sb, String s, boolean ensureAscii) {
    sb.append('"');
    int run = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      String esc = switch (c) {
        case '"' -> "\\\"";
        case '\\' -> "\\\\";
        case '\n' -> "\\n";
        case '\r' -> "\\r";
        case '\t' -> "\\t";
        case '\b' -> "\\b";
        case '\f' -> "\\f";
        default -> null;
      };
      if (esc == null && c >= 0x20 && !(ensureAscii && c > 0x7e)) {
        continue;
      }
      sb.append(s, run, i);
      run = i + 1;
      if (esc != null) {
        sb.append(esc);
      } else {
        // UTF-16 units: a supplementary character comes out as its surrogate pair, as Python does.
        String h = Integer.toHexString(c);
        sb.append("\\u").append("0".repeat(4 - h.length())).append(h);
      }
    }
    sb.append(s, run, s.length());
    sb.append('"');
  }
}
