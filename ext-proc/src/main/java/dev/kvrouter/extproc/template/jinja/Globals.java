package dev.kvrouter.extproc.template.jinja;

import java.time.Clock;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The global names transformers' environment provides: jinja2's defaults ({@code range},
 * {@code dict}, {@code namespace}, {@code cycler}, {@code joiner}) with transformers' overrides,
 * plus {@code raise_exception} and {@code strftime_now}. {@code lipsum} is left out.
 */
final class Globals {
  private Globals() {}

  /** Sentinel: calls are intercepted by the Call node so the message can be vetted. */
  static final PyCallable RAISE_EXCEPTION = (f, a, kw) -> {
    throw new IllegalStateException("raise_exception is handled by the call node");
  };

  static Map<String, Object> create(Clock clock) {
    Map<String, Object> g = new HashMap<>();
    g.put("range", (PyCallable) Globals::range);
    g.put("dict", (PyCallable) (f, a, kw) -> dict(a, kw));
    g.put("namespace", (PyCallable) Globals::namespace);
    g.put("raise_exception", RAISE_EXCEPTION);
    g.put("strftime_now", (PyCallable) (f, a, kw) -> {
      Object[] p = Args.bind("strftime_now", a, kw, new String[] {"format"}, new Object[] {Args.REQUIRED}, true);
      return Strftime.format(Args.str("strftime_now", p[0]), LocalDateTime.now(clock));
    });
    g.put("cycler", (PyCallable) (f, a, kw) -> new Cycler(a));
    g.put("joiner", (PyCallable) (f, a, kw) -> {
      Object[] p = Args.bind("joiner", a, kw, new String[] {"sep"}, new Object[] {", "}, true);
      return new Joiner(PyRepr.str(p[0]));
    });
    return Map.copyOf(g);
  }

  private static Object range(Frame f, List<Object> a, Map<String, Object> kw) {
    if (!kw.isEmpty()) {
      throw JinjaError.type("range() takes no keyword arguments");
    }
    long start = 0;
    long stop;
    long step = 1;
    switch (a.size()) {
      case 1 -> stop = PyOps.toIndex(a.get(0));
      case 2 -> {
        start = PyOps.toIndex(a.get(0));
        stop = PyOps.toIndex(a.get(1));
      }
      case 3 -> {
        start = PyOps.toIndex(a.get(0));
        stop = PyOps.toIndex(a.get(1));
        step = PyOps.toIndex(a.get(2));
      }
      default -> throw JinjaError.type("range expected at most 3 arguments, got " + a.size());
    }
    if (step == 0) {
      throw JinjaError.value("range() arg 3 must not be zero");
    }
    PyRange r = new PyRange(start, stop, step);
    if (r.length() > PyRange.MAX_RANGE) {
      throw new JinjaError("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    return r;
  }

  static Map<Object, Object> dict(List<Object> a, Map<String, Object> kw) {
    if (a.size() > 1) {
      throw JinjaError.type("dict expected at most 1 argument, got " + a.size());
    }
    Map<Object, Object> out = new LinkedHashMap<>();
    if (a.size() == 1) {
      Object src = a.get(0);
      if (src instanceof Map<?, ?> m) {
        out.putAll(m);
      } else {
        var it = PyOps.iterate(src);
        int i = 0;
        while (it.hasNext()) {
          List<Object> pair = PyOps.toList(it.next());
          if (pair.size() != 2) {
            throw JinjaError.value("dictionary update sequence element #" + i + " has length " + pair.size()
                + "; 2 is required");
          }
          PyOps.checkHashable(pair.get(0));
          out.put(pair.get(0), pair.get(1));
          i++;
        }
      }
    }
    out.putAll(kw);
    return out;
  }

  private static Object namespace(Frame f, List<Object> a, Map<String, Object> kw) {
    Namespace ns = new Namespace();
    for (Map.Entry<Object, Object> e : dict(a, kw).entrySet()) {
      Namespace.checkName(e.getKey());
      ns.attrs.put(PyRepr.str(e.getKey()), e.getValue());
    }
    return ns;
  }

  /** jinja2's cycler: {@code next()}, {@code current}, {@code reset()}. */
  static final class Cycler implements PyCallable {
    private final List<Object> items;
    private int pos;

    Cycler(List<Object> items) {
      if (items.isEmpty()) {
        throw new JinjaError("RuntimeError", "at least one item has to be provided");
      }
      this.items = new ArrayList<>(items);
    }

    @Override
    public Object call(Frame caller, List<Object> args, Map<String, Object> kwargs) {
      throw JinjaError.type("'Cycler' object is not callable");
    }

    Object next() {
      Object rv = items.get(pos);
      pos = (pos + 1) % items.size();
      return rv;
    }

    Object current() {
      return items.get(pos);
    }

    void reset() {
      pos = 0;
    }
  }

  /** jinja2's joiner: returns "" the first time it is called, the separator afterwards. */
  static final class Joiner implements PyCallable {
    private final String sep;
    private boolean used;

    Joiner(String sep) {
      this.sep = sep;
    }

    @Override
    public Object call(Frame caller, List<Object> args, Map<String, Object> kwargs) {
      if (!used) {
        used = true;
        return "";
      }
      return sep;
    }
  }
}
