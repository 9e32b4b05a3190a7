package dev.kvrouter.extproc.template.jinja;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * jinja2's built-in filters with transformers' {@code tojson}. Filters that are generators in
 * jinja2 ({@code map}, {@code select}, {@code items}, {@code unique}...) return a lazy one-shot
 * {@link PyIterator}, so their quirks (no length, always truthy) carry over. Filters no chat
 * template needs ({@code random}, {@code groupby}, {@code urlize}...) exist but fail when used.
 */
final class Filters {
  private Filters() {}

  interface Fn {
    Object apply(Frame f, Object value, List<Object> args, Map<String, Object> kwargs);
  }

  private static final Map<String, Fn> FILTERS = new HashMap<>();

  static Fn get(String name) {
    return FILTERS.get(name);
  }

  private static void reg(String name, Fn fn) {
    FILTERS.put(name, fn);
  }

  private static Object[] bind(String name, List<Object> a, Map<String, Object> kw, String[] names, Object... dflt) {
    return Args.bind(name, a, kw, names, dflt, true);
  }

  private static final Object REQ = Args.REQUIRED;
  private static final Pattern WORD = Pattern.compile("[\\p{L}\\p{N}_]+");
  private static final Pattern TITLE_SPLIT = Pattern.compile("([-\\t\\n\\x0b\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000({\\[<]+)");

  static {
    reg("abs", (f, v, a, kw) -> {
      bind("abs", a, kw, new String[0]);
      if (v instanceof Double d) {
        return Math.abs(d);
      }
      if (PyTypes.isInt(v)) {
        return PyOps.normalize(PyOps.big(v).abs());
      }
      if (v instanceof Undefined u) {
        throw u.fail();
      }
      throw JinjaError.type("bad operand type for abs(): '" + PyTypes.typeName(v) + "'");
    });
    reg("attr", (f, v, a, kw) -> {
      Object[] p = bind("attr", a, kw, new String[] {"name"}, REQ);
      String name = Args.str("attr", p[0]);
      Object m = Methods.lookup(v, name);
      if (m != null) {
        return m;
      }
      if (v instanceof Namespace ns && ns.attrs.containsKey(name)) {
        return ns.attrs.get(name);
      }
      if (v instanceof LoopContext lc && lc.attribute(name) != LoopContext.NO_ATTRIBUTE) {
        return lc.attribute(name);
      }
      return Undefined.attributeOf(v, name);
    });
    reg("batch", (f, v, a, kw) -> {
      Object[] p = bind("batch", a, kw, new String[] {"linecount", "fill_with"}, REQ, null);
      long n = PyOps.toIndex(p[0]);
      Object fill = p[1];
      Iterator<Object> src = PyOps.iterate(v);
      return new PyIterator(new Iterator<>() {
        @Override
        public boolean hasNext() {
          return src.hasNext();
        }

        @Override
        public Object next() {
          List<Object> tmp = new ArrayList<>();
          while (src.hasNext() && tmp.size() < Math.max(n, 1)) {
            tmp.add(src.next());
          }
          if (!src.hasNext() && fill != null) {
            while (tmp.size() < n) {
              tmp.add(fill);
            }
          }
          return tmp;
        }
      }, "generator");
    });
    reg("capitalize", (f, v, a, kw) -> {
      bind("capitalize", a, kw, new String[0]);
      return keepMarkup(v, PyStr.capitalize(softStr(v)));
    });
    reg("center", (f, v, a, kw) -> {
      Object[] p = bind("center", a, kw, new String[] {"width"}, 80L);
      return keepMarkup(v, PyStr.pad(softStr(v), PyOps.toIndex(p[0]), " ", 0));
    });
    Fn len = (f, v, a, kw) -> {
      bind("length", a, kw, new String[0]);
      return PyOps.len(v);
    };
    reg("count", len);
    reg("length", len);
    Fn dflt = (f, v, a, kw) -> {
      Object[] p = bind("default", a, kw, new String[] {"default_value", "boolean"}, "", false);
      return v instanceof Undefined || (PyOps.truthy(p[1]) && !PyOps.truthy(v)) ? p[0] : v;
    };
    reg("default", dflt);
    reg("d", dflt);
    reg("dictsort", (f, v, a, kw) -> {
      Object[] p = bind("dictsort", a, kw, new String[] {"case_sensitive", "by", "reverse"}, false, "key", false);
      int pos;
      if (PyOps.eq(p[1], "key")) {
        pos = 0;
      } else if (PyOps.eq(p[1], "value")) {
        pos = 1;
      } else {
        throw new JinjaError("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
      }
      boolean cs = PyOps.truthy(p[0]);
      if (!(v instanceof Map<?, ?> m)) {
        throw new JinjaError("AttributeError", "'" + PyTypes.typeName(v) + "' object has no attribute 'items'");
      }
      List<Object> items = new ArrayList<>();
      m.forEach((k, x) -> items.add(PyTuple.of(k, x)));
      return sorted(items, it -> {
        Object x = ((PyTuple) it).items().get(pos);
        return cs ? x : ignoreCase(x);
      }, PyOps.truthy(p[2]));
    });
    Fn escape = (f, v, a, kw) -> {
      bind("escape", a, kw, new String[0]);
      return Markup.escapeValue(v);
    };
    reg("e", escape);
    reg("escape", escape);
    reg("forceescape", (f, v, a, kw) -> {
      bind("forceescape", a, kw, new String[0]);
      return new Markup(Markup.escape(PyRepr.str(v)));
    });
    reg("first", (f, v, a, kw) -> {
      bind("first", a, kw, new String[0]);
      Iterator<Object> it = PyOps.iterate(v);
      return it.hasNext() ? it.next() : Undefined.hint("No first item, sequence was empty.");
    });
    reg("last", (f, v, a, kw) -> {
      bind("last", a, kw, new String[0]);
      List<Object> items = reversible(v);
      return items.isEmpty() ? Undefined.hint("No last item, sequence was empty.") : items.get(items.size() - 1);
    });
    reg("float", (f, v, a, kw) -> {
      Object[] p = bind("float", a, kw, new String[] {"default"}, 0.0);
      if (v instanceof Undefined u) {
        throw u.fail();
      }
      Double d = toFloat(v);
      return d == null ? p[0] : d;
    });
    reg("int", (f, v, a, kw) -> {
      Object[] p = bind("int", a, kw, new String[] {"default", "base"}, 0L, 10L);
      if (v instanceof Undefined u) {
        throw u.fail();
      }
      Object r = toInt(v, PyOps.toIndex(p[1]));
      return r == null ? p[0] : r;
    });
    reg("format", (f, v, a, kw) -> {
      if (!a.isEmpty() && !kw.isEmpty()) {
        throw new JinjaError("FilterArgumentError", "can't handle positional and keyword arguments at the same time");
      }
      Object s = softStrValue(v);
      Object args = kw.isEmpty() ? new PyTuple(a) : new java.util.LinkedHashMap<Object, Object>(kw);
      return PyFormat.percent(s, args);
    });
    reg("indent", (f, v, a, kw) -> {
      Object[] p = bind("indent", a, kw, new String[] {"width", "first", "blank"}, 4L, false, false);
      return indent(v, p[0], PyOps.truthy(p[1]), PyOps.truthy(p[2]));
    });
    reg("items", (f, v, a, kw) -> {
      bind("items", a, kw, new String[0]);
      if (v instanceof Undefined) {
        return new PyIterator(Collections.emptyIterator(), "generator");
      }
      if (!(v instanceof Map<?, ?> m)) {
        return new PyIterator(failing(JinjaError.type("Can only get item pairs from a mapping.")), "generator");
      }
      return new PyIterator(PyOps.iterate(new DictView(castMap(m), DictView.Kind.ITEMS)), "generator");
    });
    reg("join", (f, v, a, kw) -> {
      Object[] p = bind("join", a, kw, new String[] {"d", "attribute"}, "", null);
      Iterator<Object> it = PyOps.iterate(v);
      String sep = PyRepr.str(p[0]);
      StringBuilder sb = new StringBuilder();
      boolean first = true;
      while (it.hasNext()) {
        Object x = it.next();
        if (p[1] != null) {
          x = attrGetter(p[1], null).apply(x);
        }
        if (!first) {
          sb.append(sep);
        }
        first = false;
        PyRepr.appendStr(sb, x);
        PyOps.checkSize(sb.length());
      }
      return sb.toString();
    });
    reg("list", (f, v, a, kw) -> {
      bind("list", a, kw, new String[0]);
      return PyOps.toList(v);
    });
    reg("lower", (f, v, a, kw) -> {
      bind("lower", a, kw, new String[0]);
      return keepMarkup(v, PyStr.lower(softStr(v)));
    });
    reg("upper", (f, v, a, kw) -> {
      bind("upper", a, kw, new String[0]);
      return keepMarkup(v, PyStr.upper(softStr(v)));
    });
    reg("map", Filters::map);
    reg("select", (f, v, a, kw) -> selectOrReject(f, v, a, kw, false, false));
    reg("reject", (f, v, a, kw) -> selectOrReject(f, v, a, kw, true, false));
    reg("selectattr", (f, v, a, kw) -> selectOrReject(f, v, a, kw, false, true));
    reg("rejectattr", (f, v, a, kw) -> selectOrReject(f, v, a, kw, true, true));
    reg("max", (f, v, a, kw) -> minMax(v, a, kw, true));
    reg("min", (f, v, a, kw) -> minMax(v, a, kw, false));
    reg("replace", (f, v, a, kw) -> {
      Object[] p = bind("replace", a, kw, new String[] {"old", "new", "count"}, REQ, REQ, null);
      long count = p[2] == null ? -1 : PyOps.toIndex(p[2]);
      return PyStr.replace(PyRepr.str(v), PyRepr.str(p[0]), PyRepr.str(p[1]), count);
    });
    reg("reverse", (f, v, a, kw) -> {
      bind("reverse", a, kw, new String[0]);
      if (PyTypes.isStr(v)) {
        return PyOps.slice(v, null, null, -1L);
      }
      List<Object> items;
      if (v instanceof PyIterator) {
        items = PyOps.toList(v);
        Collections.reverse(items);
        return items;
      }
      items = reversible(v);
      Collections.reverse(items);
      return new PyIterator(items.iterator(), "list_reverseiterator");
    });
    reg("round", (f, v, a, kw) -> {
      Object[] p = bind("round", a, kw, new String[] {"precision", "method"}, 0L, "common");
      return round(v, PyOps.toIndex(p[0]), PyRepr.str(p[1]));
    });
    reg("safe", (f, v, a, kw) -> {
      bind("safe", a, kw, new String[0]);
      return v instanceof Markup ? v : new Markup(PyRepr.str(v));
    });
    reg("slice", (f, v, a, kw) -> {
      Object[] p = bind("slice", a, kw, new String[] {"slices", "fill_with"}, REQ, null);
      List<Object> seq = PyOps.toList(v);
      long slices = PyOps.toIndex(p[0]);
      if (slices <= 0) {
        throw new JinjaError("ZeroDivisionError", "integer division or modulo by zero");
      }
      int per = (int) (seq.size() / slices);
      int extra = (int) (seq.size() % slices);
      List<Object> out = new ArrayList<>();
      int offset = 0;
      for (int i = 0; i < slices; i++) {
        int start = offset + i * per;
        if (i < extra) {
          offset++;
        }
        int end = offset + (i + 1) * per;
        List<Object> tmp = new ArrayList<>(seq.subList(start, end));
        if (p[1] != null && i >= extra) {
          tmp.add(p[1]);
        }
        out.add(tmp);
      }
      return new PyIterator(out.iterator(), "generator");
    });
    reg("sort", (f, v, a, kw) -> {
      Object[] p = bind("sort", a, kw, new String[] {"reverse", "case_sensitive", "attribute"}, false, false, null);
      boolean cs = PyOps.truthy(p[1]);
      List<java.util.function.Function<Object, Object>> getters = new ArrayList<>();
      if (p[2] == null) {
        getters.add(x -> x);
      } else if (PyTypes.isStr(p[2])) {
        for (String part : PyTypes.str(p[2]).split(",", -1)) {
          getters.add(attrGetter(part, null));
        }
      } else {
        getters.add(attrGetter(p[2], null));
      }
      return sorted(PyOps.toList(v), x -> {
        List<Object> key = new ArrayList<>(getters.size());
        for (var g : getters) {
          Object k = g.apply(x);
          key.add(cs ? k : ignoreCase(k));
        }
        return key;
      }, PyOps.truthy(p[0]));
    });
    reg("string", (f, v, a, kw) -> {
      bind("string", a, kw, new String[0]);
      return softStrValue(v);
    });
    reg("sum", (f, v, a, kw) -> {
      Object[] p = bind("sum", a, kw, new String[] {"attribute", "start"}, null, 0L);
      Object acc = p[1];
      if (PyTypes.isStr(acc)) {
        throw JinjaError.type("sum() can't sum strings [use ''.join(seq) instead]");
      }
      var getter = p[0] == null ? null : attrGetter(p[0], null);
      Iterator<Object> it = PyOps.iterate(v);
      while (it.hasNext()) {
        Object x = it.next();
        acc = PyOps.add(acc, getter == null ? x : getter.apply(x));
      }
      return acc;
    });
    reg("title", (f, v, a, kw) -> {
      bind("title", a, kw, new String[0]);
      return keepMarkup(v, title(softStr(v)));
    });
    reg("tojson", (f, v, a, kw) -> {
      Object[] p = bind("tojson", a, kw, new String[] {"ensure_ascii", "indent", "separators", "sort_keys"},
          false, null, null, false);
      JsonDumps.Options o = (p[0] == Boolean.FALSE && p[1] == null && p[2] == null && p[3] == Boolean.FALSE)
          ? JsonDumps.DEFAULT : JsonDumps.options(p[0], p[1], p[2], p[3]);
      return JsonDumps.dumps(v, o);
    });
    reg("trim", (f, v, a, kw) -> {
      Object[] p = bind("trim", a, kw, new String[] {"chars"}, (Object) null);
      String chars = p[0] == null ? null : Args.str("strip", p[0]);
      return keepMarkup(v, PyStr.strip(softStr(v), chars, true, true));
    });
    reg("truncate", (f, v, a, kw) -> {
      Object[] p = bind("truncate", a, kw, new String[] {"length", "killwords", "end", "leeway"}, 255L, false, "...",
          null);
      long length = PyOps.toIndex(p[0]);
      String end = PyRepr.str(p[2]);
      long leeway = p[3] == null ? 5 : PyOps.toIndex(p[3]);
      if (length < PyStr.len(end)) {
        throw new JinjaError("AssertionError", "expected length >= " + PyStr.len(end) + ", got " + length);
      }
      if (leeway < 0) {
        throw new JinjaError("AssertionError", "expected leeway >= 0, got " + leeway);
      }
      if (!PyTypes.isStr(v)) {
        // do_truncate takes len(s) of the value itself and returns it unchanged when short enough.
        if (PyOps.len(v) <= length + leeway) {
          return v;
        }
        String type = PyTypes.typeName(v);
        if (v instanceof Map<?, ?>) {
          throw JinjaError.type("unhashable type: 'slice'");
        }
        if (!(v instanceof List<?> || v instanceof PyTuple || v instanceof PyRange)) {
          throw JinjaError.type("'" + type + "' object is not subscriptable");
        }
        if (PyOps.truthy(p[1])) {
          throw JinjaError.type(v instanceof PyRange ? "unsupported operand type(s) for +: 'range' and 'str'"
              : "can only concatenate " + type + " (not \"str\") to " + type);
        }
        throw new JinjaError("AttributeError", "'" + type + "' object has no attribute 'rsplit'");
      }
      String s = softStr(v);
      if (PyStr.len(s) <= length + leeway) {
        return v;
      }
      String head = PyStr.slice(s, PyOps.sliceIndices(null, length - PyStr.len(end), null, PyStr.len(s)));
      if (PyOps.truthy(p[1])) {
        return head + end;
      }
      return PyTypes.str(PyStr.rsplit(head, " ", 1).get(0)) + end;
    });
    reg("unique", (f, v, a, kw) -> {
      Object[] p = bind("unique", a, kw, new String[] {"case_sensitive", "attribute"}, false, null);
      boolean cs = PyOps.truthy(p[0]);
      var getter = attrGetter(p[1], null);
      Iterator<Object> src = PyOps.iterate(v);
      List<Object> seen = new ArrayList<>();
      return new PyIterator(new Lookahead(src, x -> {
        Object key = getter.apply(x);
        if (!cs) {
          key = ignoreCase(key);
        }
        PyOps.checkHashable(key);
        if (PyOps.containsSeq(seen, key)) {
          return false;
        }
        seen.add(key);
        return true;
      }), "generator");
    });
    reg("wordcount", (f, v, a, kw) -> {
      bind("wordcount", a, kw, new String[0]);
      Matcher m = WORD.matcher(softStr(v));
      long n = 0;
      while (m.find()) {
        n++;
      }
      return n;
    });
    for (String name : new String[] {"filesizeformat", "groupby", "pprint", "random", "striptags", "urlencode",
        "urlize", "wordwrap", "xmlattr"}) {
      reg(name, (f, v, a, kw) -> {
        throw JinjaError.type("the '" + name + "' filter is not supported by kvrouter's template interpreter");
      });
    }
  }


  @SuppressWarnings("unchecked")
  private static Map<Object, Object> castMap(Map<?, ?> m) {
    return (Map<Object, Object>) m;
  }

  private static Iterator<Object> failing(RuntimeException e) {
    return new Iterator<>() {
      @Override
      public boolean hasNext() {
        throw e;
      }

      @Override
      public Object next() {
        throw e;
      }
    };
  }

  /** markupsafe.soft_str as text. */
  static String softStr(Object v) {
    return PyRepr.str(v);
  }

  /** markupsafe.soft_str: strings (and markup) unchanged, anything else through str(). */
  static Object softStrValue(Object v) {
    return PyTypes.isStr(v) ? v : PyRepr.str(v);
  }

  private static Object keepMarkup(Object original, String result) {
    return original instanceof Markup ? new Markup(result) : result;
  }

  static Object ignoreCase(Object v) {
    return PyTypes.isStr(v) ? PyStr.lower(PyTypes.str(v)) : v;
  }

  private static List<Object> reversible(Object v) {
    if (v instanceof PyIterator it) {
      throw JinjaError.type("'" + it.kind + "' object is not reversible");
    }
    if (v instanceof Map || v instanceof Undefined || PyTypes.isStr(v) || v instanceof List || v instanceof PyTuple
        || v instanceof PyRange || v instanceof DictView) {
      return PyOps.toList(v);
    }
    throw JinjaError.type("'" + PyTypes.typeName(v) + "' object is not reversible");
  }

  /** Python's sorted(): stable, fails on incomparable keys. */
  private static List<Object> sorted(List<Object> items, java.util.function.Function<Object, Object> key,
      boolean reverse) {
    List<Object[]> keyed = new ArrayList<>(items.size());
    for (Object x : items) {
      keyed.add(new Object[] {key.apply(x), x});
    }
    java.util.Comparator<Object[]> cmp = (x, y) -> PyOps.compare3(x[0], y[0]);
    // List.sort is stable, and a reversed comparator keeps equal keys in input order, which is
    // what Python's sorted(reverse=True) guarantees too.
    keyed.sort(reverse ? cmp.reversed() : cmp);
    List<Object> out = new ArrayList<>(keyed.size());
    for (Object[] k : keyed) {
      out.add(k[1]);
    }
    return out;
  }

  /** jinja2's make_attrgetter: "a.b.0" walks getitem per part, digits become ints. */
  static java.util.function.Function<Object, Object> attrGetter(Object attribute, Object dflt) {
    List<Object> parts = new ArrayList<>();
    if (attribute != null) {
      if (PyTypes.isStr(attribute)) {
        for (String part : PyTypes.str(attribute).split("\\.", -1)) {
          parts.add(!part.isEmpty() && part.chars().allMatch(Character::isDigit) ? (Object) Long.parseLong(part) : part);
        }
      } else {
        parts.add(attribute);
      }
    }
    return item -> {
      Object x = item;
      for (Object part : parts) {
        x = PyOps.getitem(x, part, true);
        if (dflt != null && x instanceof Undefined) {
          x = dflt;
        }
      }
      return x;
    };
  }

  private static Object map(Frame f, Object v, List<Object> a, Map<String, Object> kw) {
    java.util.function.Function<Object, Object> fn;
    if (a.isEmpty() && kw.containsKey("attribute")) {
      Map<String, Object> rest = new java.util.LinkedHashMap<>(kw);
      Object attribute = rest.remove("attribute");
      Object dflt = rest.remove("default");
      if (!rest.isEmpty()) {
        throw new JinjaError("FilterArgumentError", "Unexpected keyword argument '" + rest.keySet().iterator().next()
            + "'");
      }
      fn = attrGetter(attribute, dflt);
    } else {
      if (a.isEmpty()) {
        throw new JinjaError("FilterArgumentError", "map requires a filter argument");
      }
      Object name = a.get(0);
      List<Object> rest = a.subList(1, a.size());
      Fn filter = PyTypes.isStr(name) ? FILTERS.get(PyTypes.str(name)) : null;
      if (filter == null) {
        throw new JinjaError("TemplateRuntimeError", "No filter named " + (PyTypes.isStr(name)
            ? "'" + PyTypes.str(name) + "'" : "of that type") + ".");
      }
      fn = x -> filter.apply(f, x, rest, kw);
    }
    if (!PyOps.truthy(v)) {
      return new PyIterator(Collections.emptyIterator(), "generator");
    }
    Iterator<Object> src = PyOps.iterate(v);
    return new PyIterator(new Iterator<>() {
      @Override
      public boolean hasNext() {
        return src.hasNext();
      }

      @Override
      public Object next() {
        f.render.step();
        return fn.apply(src.next());
      }
    }, "generator");
  }

  private static Object selectOrReject(Frame f, Object v, List<Object> a, Map<String, Object> kw, boolean reject,
      boolean lookupAttr) {
    java.util.function.Function<Object, Object> trans = x -> x;
    int off = 0;
    if (lookupAttr) {
      if (a.isEmpty()) {
        throw new JinjaError("FilterArgumentError", "Missing parameter for attribute name");
      }
      trans = attrGetter(a.get(0), null);
      off = 1;
    }
    java.util.function.Predicate<Object> test;
    if (a.size() > off) {
      Object name = a.get(off);
      List<Object> rest = a.subList(off + 1, a.size());
      test = x -> Tests.call(f, name, x, rest, kw);
    } else {
      test = PyOps::truthy;
    }
    if (!PyOps.truthy(v)) {
      return new PyIterator(Collections.emptyIterator(), "generator");
    }
    var t = trans;
    return new PyIterator(new Lookahead(PyOps.iterate(v), x -> {
      f.render.step();
      return test.test(t.apply(x)) != reject;
    }), "generator");
  }

  /** A lazily filtered iterator. */
  private static final class Lookahead implements Iterator<Object> {
    private final Iterator<Object> src;
    private final java.util.function.Predicate<Object> keep;
    private Object next;
    private boolean ready;

    Lookahead(Iterator<Object> src, java.util.function.Predicate<Object> keep) {
      this.src = src;
      this.keep = keep;
    }

    @Override
    public boolean hasNext() {
      while (!ready && src.hasNext()) {
        Object x = src.next();
        if (keep.test(x)) {
          next = x;
          ready = true;
        }
      }
      return ready;
    }

    @Override
    public Object next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      ready = false;
      return next;
    }
  }

  private static Object minMax(Object v, List<Object> a, Map<String, Object> kw, boolean max) {
    Object[] p = bind(max ? "max" : "min", a, kw, new String[] {"case_sensitive", "attribute"}, false, null);
    boolean cs = PyOps.truthy(p[0]);
    var getter = attrGetter(p[1], null);
    Iterator<Object> it = PyOps.iterate(v);
    if (!it.hasNext()) {
      return Undefined.hint("No aggregated item, sequence was empty.");
    }
    Object best = it.next();
    Object bestKey = cs ? getter.apply(best) : ignoreCase(getter.apply(best));
    while (it.hasNext()) {
      Object x = it.next();
      Object k = cs ? getter.apply(x) : ignoreCase(getter.apply(x));
      boolean better = max ? PyOps.compare("gt", k, bestKey) : PyOps.compare("lt", k, bestKey);
      if (better) {
        best = x;
        bestKey = k;
      }
    }
    return best;
  }

  private static Object indent(Object s, Object width, boolean first, boolean blank) {
    String indention = PyTypes.isStr(width) ? PyTypes.str(width) : " ".repeat((int) Math.max(0, PyOps.toIndex(width)));
    if (!PyTypes.isStr(s)) {
      // do_indent starts with s += "\n" and then calls s.splitlines().
      if (s instanceof Undefined u) {
        throw u.fail();
      }
      String type = PyTypes.typeName(s);
      if (s instanceof List<?>) {
        throw new JinjaError("AttributeError", "'list' object has no attribute 'splitlines'");
      }
      throw JinjaError.type(s instanceof PyTuple ? "can only concatenate tuple (not \"str\") to tuple"
          : "unsupported operand type(s) for +=: '" + type + "' and 'str'");
    }
    String text = PyRepr.str(s) + "\n";
    List<Object> lines = PyStr.splitlines(text, false);
    StringBuilder rv = new StringBuilder();
    if (blank) {
      for (int i = 0; i < lines.size(); i++) {
        if (i > 0) {
          rv.append('\n').append(indention);
        }
        rv.append((String) lines.get(i));
      }
    } else {
      rv.append((String) lines.get(0));
      for (int i = 1; i < lines.size(); i++) {
        String line = (String) lines.get(i);
        rv.append('\n');
        if (!line.isEmpty()) {
          rv.append(indention);
        }
        rv.append(line);
      }
    }
    String out = first ? indention + rv : rv.toString();
    return s instanceof Markup ? new Markup(out) : out;
  }

  private static String title(String s) {
    StringBuilder sb = new StringBuilder(s.length());
    Matcher m = TITLE_SPLIT.matcher(s);
    int last = 0;
    List<String> items = new ArrayList<>();
    while (m.find()) {
      items.add(s.substring(last, m.start()));
      items.add(m.group());
      last = m.end();
    }
    items.add(s.substring(last));
    for (String item : items) {
      if (item.isEmpty()) {
        continue;
      }
      int cp = item.codePointAt(0);
      sb.append(PyStr.upper(new String(Character.toChars(cp))));
      sb.append(PyStr.lower(item.substring(Character.charCount(cp))));
    }
    return sb.toString();
  }

  private static Object round(Object v, long precision, String method) {
    if (!method.equals("common") && !method.equals("ceil") && !method.equals("floor")) {
      throw new JinjaError("FilterArgumentError", "method must be common, ceil or floor");
    }
    if (v instanceof Undefined u) {
      throw u.fail();
    }
    if (!PyTypes.isNumber(v)) {
      throw JinjaError.type("type " + PyTypes.typeName(v) + " doesn't define __round__ method");
    }
    if (method.equals("common")) {
      if (PyTypes.isInt(v)) {
        if (precision >= 0) {
          return v instanceof Boolean b ? (b ? 1L : 0L) : v;
        }
        BigDecimal r = new BigDecimal(PyOps.big(v)).setScale((int) precision, RoundingMode.HALF_EVEN);
        return PyOps.normalize(r.toBigInteger());
      }
      double d = (Double) v;
      if (Double.isNaN(d) || Double.isInfinite(d)) {
        return d;
      }
      double r = new BigDecimal(d).setScale((int) Math.max(-400, Math.min(precision, 400)), RoundingMode.HALF_EVEN)
          .doubleValue();
      return Math.copySign(r, d); // round(-0.4) is -0.0
    }
    double scale = Math.pow(10, precision);
    double x = PyOps.dbl(v) * scale;
    // math.ceil/floor return an int, so a zero result is never negative
    double r = (method.equals("ceil") ? Math.ceil(x) : Math.floor(x)) + 0.0;
    return r / scale;
  }

  private static final Pattern INT_RE = Pattern.compile("[+-]?\\d+(_\\d+)*");
  private static final Pattern FLOAT_RE = Pattern.compile(
      "[+-]?((\\d+(_\\d+)*)(\\.(\\d+(_\\d+)*)?)?|\\.\\d+(_\\d+)*)([eE][+-]?\\d+(_\\d+)*)?");
  private static final Pattern SPECIAL_FLOAT = Pattern.compile("[+-]?(inf|infinity|nan)", Pattern.CASE_INSENSITIVE);

  /** jinja2's int filter: int(value, base) for strings, else int(value), falling back to int(float(value)). */
  static Object toInt(Object v, long base) {
    if (PyTypes.isStr(v)) {
      String s = asciiDigits(PyStr.strip(PyTypes.str(v), null, true, true));
      if (base == 10 && INT_RE.matcher(s).matches()) {
        return PyOps.normalize(new BigInteger(s.replace("_", "")));
      }
      if (base != 10) {
        try {
          String t = s.replace("_", "");
          boolean neg = t.startsWith("-");
          if (t.startsWith("-") || t.startsWith("+")) {
            t = t.substring(1);
          }
          long b = base;
          if (base == 0 || base == 16 || base == 8 || base == 2) {
            String lower = t.toLowerCase();
            if (lower.startsWith("0x") && (base == 0 || base == 16)) {
              b = 16;
              t = t.substring(2);
            } else if (lower.startsWith("0o") && (base == 0 || base == 8)) {
              b = 8;
              t = t.substring(2);
            } else if (lower.startsWith("0b") && (base == 0 || base == 2)) {
              b = 2;
              t = t.substring(2);
            } else if (base == 0) {
              b = 10;
            }
          }
          BigInteger r = new BigInteger(t, (int) b);
          return PyOps.normalize(neg ? r.negate() : r);
        } catch (NumberFormatException e) {
          // fall through to the float path
        }
      }
      Double d = toFloat(v);
      if (d == null || d.isNaN() || d.isInfinite()) {
        return null;
      }
      return PyOps.normalize(new BigDecimal(d).toBigInteger());
    }
    if (v instanceof Boolean b) {
      return b ? 1L : 0L;
    }
    if (PyTypes.isInt(v)) {
      return v;
    }
    if (v instanceof Double d) {
      if (d.isNaN() || d.isInfinite()) {
        return null;
      }
      return PyOps.normalize(new BigDecimal(d).toBigInteger());
    }
    return null;
  }

  /** int() and float() accept any Unicode decimal digit (category Nd) as its ASCII value. */
  private static String asciiDigits(String s) {
    if (s.chars().allMatch(c -> c < 128)) {
      return s;
    }
    StringBuilder sb = new StringBuilder(s.length());
    s.codePoints().forEach(cp -> {
      if (cp >= 128 && Character.getType(cp) == Character.DECIMAL_DIGIT_NUMBER) {
        sb.append((char) ('0' + Character.digit(cp, 10)));
      } else {
        sb.appendCodePoint(cp);
      }
    });
    return sb.toString();
  }

  /** Python float(value) or null when it would raise. */
  static Double toFloat(Object v) {
    if (v instanceof Double d) {
      return d;
    }
    if (PyTypes.isInt(v)) {
      try {
        return PyOps.dbl(v);
      } catch (JinjaError e) {
        return null;
      }
    }
    if (PyTypes.isStr(v)) {
      String s = asciiDigits(PyStr.strip(PyTypes.str(v), null, true, true));
      if (SPECIAL_FLOAT.matcher(s).matches()) {
        boolean neg = s.startsWith("-");
        return s.toLowerCase().contains("nan") ? Double.NaN
            : (neg ? Double.NEGATIVE_INFINITY : Double.POSITIVE_INFINITY);
      }
      if (FLOAT_RE.matcher(s).matches() && s.chars().anyMatch(Character::isDigit)) {
        return Double.parseDouble(s.replace("_", ""));
      }
    }
    return null;
  }
}
