package dev.kvrouter.extproc.template.jinja;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Python methods of built-in values reachable from a template ({@code content.strip('\n')},
 * {@code message.get('x')}, {@code d.items()}). The sandbox refuses the methods that mutate a
 * list or dict: looking them up yields an undefined that raises {@code SecurityError} when used.
 */
final class Methods {
  private Methods() {}

  static final Set<String> STR = Set.of("capitalize", "casefold", "center", "count", "encode", "endswith",
      "expandtabs", "find", "format", "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
      "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower",
      "lstrip", "maketrans", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust",
      "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title",
      "translate", "upper", "zfill");
  static final Set<String> DICT = Set.of("copy", "fromkeys", "get", "items", "keys", "values");
  static final Set<String> DICT_MUTATING = Set.of("clear", "pop", "popitem", "setdefault", "update");
  static final Set<String> LIST = Set.of("copy", "count", "index");
  static final Set<String> LIST_MUTATING = Set.of("append", "clear", "pop", "reverse", "insert", "sort", "extend",
      "remove");
  static final Set<String> MARKUP_EXTRA = Set.of("escape", "unescape", "striptags");

  /** Whether {@code name} is a method or attribute of any built-in type handled here. */
  static boolean anyMethod(String name) {
    return STR.contains(name) || DICT.contains(name) || DICT_MUTATING.contains(name) || LIST.contains(name)
        || LIST_MUTATING.contains(name) || MARKUP_EXTRA.contains(name) || name.equals("next")
        || name.equals("reset") || name.equals("current");
  }

  /** A bound method, an unsafe undefined, or null when the value has no such attribute. */
  static Object lookup(Object obj, String name) {
    if (obj instanceof String) {
      return STR.contains(name) ? new BoundMethod(obj, name, Methods::str) : null;
    }
    if (obj instanceof Map) {
      if (DICT.contains(name)) {
        return new BoundMethod(obj, name, Methods::dict);
      }
      return DICT_MUTATING.contains(name) ? Undefined.unsafe(obj, name) : null;
    }
    if (obj instanceof List) {
      if (LIST.contains(name)) {
        return new BoundMethod(obj, name, Methods::list);
      }
      return LIST_MUTATING.contains(name) ? Undefined.unsafe(obj, name) : null;
    }
    if (obj instanceof PyTuple) {
      return name.equals("count") || name.equals("index") ? new BoundMethod(obj, name, Methods::tuple) : null;
    }
    if (obj instanceof Markup) {
      return STR.contains(name) || MARKUP_EXTRA.contains(name) ? new BoundMethod(obj, name, Methods::markup) : null;
    }
    if (obj instanceof Globals.Cycler c) {
      return switch (name) {
        case "next", "reset" -> new BoundMethod(obj, name, (self, n, a, kw) -> {
          Args.none(n, a, kw);
          if (n.equals("next")) {
            return c.next();
          }
          c.reset();
          return null;
        });
        case "current" -> c.current();
        default -> null;
      };
    }
    return null;
  }

  // ---- str -------------------------------------------------------------------------------------

  private static final Object[] NONE1 = {null};
  private static final Object[] NONE2 = {null, null};

  static Object str(Object selfObj, String name, List<Object> a, Map<String, Object> kw) {
    String s = (String) selfObj;
    String fn = "str." + name;
    switch (name) {
      case "strip", "lstrip", "rstrip" -> {
        Object[] p = Args.bind(name, a, kw, new String[] {"chars"}, NONE1, false);
        String chars = Args.strOrNone(name, p[0]);
        return PyStr.strip(s, chars, !name.equals("rstrip"), !name.equals("lstrip"));
      }
      case "split", "rsplit" -> {
        Object[] p = Args.bind(name, a, kw, new String[] {"sep", "maxsplit"}, new Object[] {null, -1L}, true);
        String sep = Args.strOrNone(name, p[0]);
        long max = PyOps.toIndex(p[1]);
        return name.equals("split") ? PyStr.split(s, sep, max) : PyStr.rsplit(s, sep, max);
      }
      case "splitlines" -> {
        Object[] p = Args.bind(name, a, kw, new String[] {"keepends"}, new Object[] {false}, true);
        return PyStr.splitlines(s, PyOps.truthy(p[0]));
      }
      case "startswith", "endswith" -> {
        Object[] p = Args.bind(name, a, kw, new String[] {"prefix", "start", "end"},
            new Object[] {Args.REQUIRED, null, null}, false);
        return PyStr.startsOrEnds(s, p[0], p[1], p[2], name.equals("endswith"), name);
      }
      case "find", "rfind", "index", "rindex", "count" -> {
        Object[] p = Args.bind(name, a, kw, new String[] {"sub", "start", "end"},
            new Object[] {Args.REQUIRED, null, null}, false);
        String sub = Args.str(name, p[0]);
        if (name.equals("count")) {
          return PyStr.count(s, sub, p[1], p[2]);
        }
        long r = PyStr.find(s, sub, p[1], p[2], name.startsWith("r"));
        if (r < 0 && name.endsWith("index")) {
          throw JinjaError.value("substring not found");
        }
        return r;
      }
      case "replace" -> {
        Object[] p = Args.bind(name, a, kw, new String[] {"old", "new", "count"},
            new Object[] {Args.REQUIRED, Args.REQUIRED, -1L}, false);
        return PyStr.replace(s, Args.str(name, p[0]), Args.str(name, p[1]), PyOps.toIndex(p[2]));
      }
      case "upper" -> {
        Args.none(fn, a, kw);
        return PyStr.upper(s);
      }
      case "lower" -> {
        Args.none(fn, a, kw);
        return PyStr.lower(s);
      }
      case "casefold" -> {
        Args.none(fn, a, kw);
        return PyStr.lower(s).replace("ß", "ss");
      }
      case "title" -> {
        Args.none(fn, a, kw);
        return PyStr.title(s);
      }
      case "capitalize" -> {
        Args.none(fn, a, kw);
        return PyStr.capitalize(s);
      }
      case "swapcase" -> {
        Args.none(fn, a, kw);
        return PyStr.swapcase(s);
      }
      case "join" -> {
        Object[] p = Args.bind(name, a, kw, new String[] {"iterable"}, new Object[] {Args.REQUIRED}, false);
        return join(s, p[0]);
      }
      case "format" -> {
        return PyFormat.strFormat(s, a, kw);
      }
      case "format_map" -> {
        Object[] p = Args.bind(name, a, kw, new String[] {"mapping"}, new Object[] {Args.REQUIRED}, false);
        if (!(p[0] instanceof Map<?, ?> m)) {
          throw JinjaError.type("format_map() argument must be a mapping");
        }
        Map<String, Object> kws = new LinkedHashMap<>();
        m.forEach((k, v) -> kws.put(PyRepr.str(k), v));
        return PyFormat.strFormat(s, List.of(), kws);
      }
      case "center", "ljust", "rjust" -> {
        Object[] p = Args.bind(name, a, kw, new String[] {"width", "fillchar"}, new Object[] {Args.REQUIRED, " "}, false);
        String fill = Args.str(name, p[1]);
        if (PyStr.len(fill) != 1) {
          throw JinjaError.type("The fill character must be exactly one character long");
        }
        int align = name.equals("center") ? 0 : name.equals("ljust") ? -1 : 1;
        return PyStr.pad(s, PyOps.toIndex(p[0]), fill, align);
      }
      case "zfill" -> {
        Object[] p = Args.bind(name, a, kw, new String[] {"width"}, new Object[] {Args.REQUIRED}, false);
        return PyStr.zfill(s, PyOps.toIndex(p[0]));
      }
      case "expandtabs" -> {
        Object[] p = Args.bind(name, a, kw, new String[] {"tabsize"}, new Object[] {8L}, true);
        return PyStr.expandtabs(s, PyOps.toIndex(p[0]));
      }
      case "partition", "rpartition" -> {
        Object[] p = Args.bind(name, a, kw, new String[] {"sep"}, new Object[] {Args.REQUIRED}, false);
        String sep = Args.str(name, p[0]);
        if (sep.isEmpty()) {
          throw JinjaError.value("empty separator");
        }
        int i = name.equals("partition") ? s.indexOf(sep) : s.lastIndexOf(sep);
        if (i < 0) {
          return name.equals("partition") ? PyTuple.of(s, "", "") : PyTuple.of("", "", s);
        }
        return PyTuple.of(s.substring(0, i), sep, s.substring(i + sep.length()));
      }
      case "removeprefix", "removesuffix" -> {
        Object[] p = Args.bind(name, a, kw, new String[] {"affix"}, new Object[] {Args.REQUIRED}, false);
        String x = Args.str(name, p[0]);
        if (name.equals("removeprefix")) {
          return s.startsWith(x) ? s.substring(x.length()) : s;
        }
        return s.endsWith(x) && !x.isEmpty() ? s.substring(0, s.length() - x.length()) : s;
      }
      case "isdigit", "isdecimal", "isnumeric" -> {
        Args.none(fn, a, kw);
        return PyStr.all(s, Character::isDigit);
      }
      case "isalpha" -> {
        Args.none(fn, a, kw);
        return PyStr.all(s, Character::isLetter);
      }
      case "isalnum" -> {
        Args.none(fn, a, kw);
        return PyStr.all(s, Character::isLetterOrDigit);
      }
      case "isspace" -> {
        Args.none(fn, a, kw);
        return PyStr.all(s, PyStr::isSpace);
      }
      case "isascii" -> {
        Args.none(fn, a, kw);
        return s.chars().allMatch(c -> c < 0x80);
      }
      case "isupper" -> {
        Args.none(fn, a, kw);
        return PyStr.isUpperStr(s);
      }
      case "islower" -> {
        Args.none(fn, a, kw);
        return PyStr.isLowerStr(s);
      }
      case "istitle" -> {
        Args.none(fn, a, kw);
        return !s.isEmpty() && PyStr.title(s).equals(s) && s.codePoints().anyMatch(PyStr::isCased);
      }
      case "isprintable" -> {
        Args.none(fn, a, kw);
        return s.codePoints().allMatch(cp -> (cp >= 0x20 && cp < 0x7f) || (cp >= 0x80 && PyRepr.isPrintable(cp)));
      }
      case "isidentifier" -> {
        Args.none(fn, a, kw);
        return !s.isEmpty() && (s.charAt(0) == '_' || Character.isUnicodeIdentifierStart(s.codePointAt(0)))
            && s.codePoints().allMatch(cp -> cp == '_' || Character.isUnicodeIdentifierPart(cp));
      }
      default -> throw JinjaError.type("str." + name + "() is not supported by the template interpreter");
    }
  }

  static String join(String sep, Object iterable) {
    StringBuilder sb = new StringBuilder();
    int i = 0;
    var it = PyOps.iterate(iterable);
    while (it.hasNext()) {
      Object x = it.next();
      if (!PyTypes.isStr(x)) {
        throw JinjaError.type("sequence item " + i + ": expected str instance, " + PyTypes.typeName(x) + " found");
      }
      if (i++ > 0) {
        sb.append(sep);
      }
      sb.append(PyTypes.str(x));
      PyOps.checkSize(sb.length());
    }
    return sb.toString();
  }

  // ---- Markup: str methods whose str results stay markup, with str arguments escaped -----------

  static Object markup(Object selfObj, String name, List<Object> a, Map<String, Object> kw) {
    Markup m = (Markup) selfObj;
    switch (name) {
      case "escape" -> {
        return m;
      }
      case "unescape", "striptags" -> throw JinjaError.type("Markup." + name + "() is not supported");
      default -> {
        List<Object> escaped = new ArrayList<>(a.size());
        for (Object x : a) {
          escaped.add(x instanceof String s ? Markup.escape(s) : x instanceof Markup mx ? mx.text : x);
        }
        Object r = str(m.text, name, escaped, kw);
        return wrap(r);
      }
    }
  }

  private static Object wrap(Object r) {
    if (r instanceof String s) {
      return new Markup(s);
    }
    if (r instanceof List<?> l) {
      List<Object> out = new ArrayList<>(l.size());
      for (Object x : l) {
        out.add(x instanceof String s ? new Markup(s) : x);
      }
      return out;
    }
    if (r instanceof PyTuple t) {
      List<Object> out = new ArrayList<>();
      for (Object x : t.items()) {
        out.add(x instanceof String s ? new Markup(s) : x);
      }
      return new PyTuple(out);
    }
    return r;
  }

  // ---- dict, list, tuple -----------------------------------------------------------------------

  @SuppressWarnings("unchecked")
  static Object dict(Object selfObj, String name, List<Object> a, Map<String, Object> kw) {
    Map<Object, Object> m = (Map<Object, Object>) selfObj;
    switch (name) {
      case "get" -> {
        Object[] p = Args.bind("get", a, kw, new String[] {"key", "default"}, new Object[] {Args.REQUIRED, null}, false);
        PyOps.checkHashable(p[0]);
        return PyOps.containsKey(m, p[0]) ? PyOps.dictGet(m, p[0]) : p[1];
      }
      case "items" -> {
        Args.none("items", a, kw);
        return new DictView(m, DictView.Kind.ITEMS);
      }
      case "keys" -> {
        Args.none("keys", a, kw);
        return new DictView(m, DictView.Kind.KEYS);
      }
      case "values" -> {
        Args.none("values", a, kw);
        return new DictView(m, DictView.Kind.VALUES);
      }
      case "copy" -> {
        Args.none("copy", a, kw);
        return new LinkedHashMap<>(m);
      }
      default -> {
        Object[] p = Args.bind("fromkeys", a, kw, new String[] {"iterable", "value"}, new Object[] {Args.REQUIRED, null},
            false);
        Map<Object, Object> out = new LinkedHashMap<>();
        PyOps.iterate(p[0]).forEachRemaining(k -> out.put(k, p[1]));
        return out;
      }
    }
  }

  static Object list(Object selfObj, String name, List<Object> a, Map<String, Object> kw) {
    List<?> l = (List<?>) selfObj;
    return seqMethod(l, name, a, kw, "list");
  }

  static Object tuple(Object selfObj, String name, List<Object> a, Map<String, Object> kw) {
    return seqMethod(((PyTuple) selfObj).items(), name, a, kw, "tuple");
  }

  private static Object seqMethod(List<?> l, String name, List<Object> a, Map<String, Object> kw, String type) {
    switch (name) {
      case "copy" -> {
        Args.none("copy", a, kw);
        return new ArrayList<>(l);
      }
      case "count" -> {
        Object[] p = Args.bind("count", a, kw, new String[] {"value"}, new Object[] {Args.REQUIRED}, false);
        long c = 0;
        for (Object x : l) {
          if (PyOps.eq(x, p[0])) {
            c++;
          }
        }
        return c;
      }
      default -> {
        Object[] p = Args.bind("index", a, kw, new String[] {"value", "start", "stop"},
            new Object[] {Args.REQUIRED, 0L, (long) Integer.MAX_VALUE}, false);
        long[] sl = PyOps.sliceIndices(p[1], p[2], null, l.size());
        for (long i = sl[0]; i < sl[0] + sl[3]; i++) {
          if (PyOps.eq(l.get((int) i), p[0])) {
            return i;
          }
        }
        throw JinjaError.value(type + ".index(x): x not in " + type);
      }
    }
  }
}
