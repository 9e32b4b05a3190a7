package dev.kvrouter.extproc.template.jinja;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** jinja2's built-in tests ({@code is defined}, {@code is string}, ...), with Python semantics. */
final class Tests {
  private Tests() {}

  interface Fn {
    boolean test(Frame f, Object value, List<Object> args, Map<String, Object> kwargs);
  }

  private interface Unary {
    boolean test(Object value);
  }

  private interface Binary {
    boolean test(Object value, Object other);
  }

  private static final Map<String, Fn> TESTS = new HashMap<>();

  private static void unary(String name, Unary u) {
    TESTS.put(name, (f, v, a, kw) -> {
      Args.bind(name, a, kw, new String[0], new Object[0], true);
      return u.test(v);
    });
  }

  private static void binary(String name, String param, Binary b) {
    TESTS.put(name, (f, v, a, kw) -> {
      Object[] p = Args.bind(name, a, kw, new String[] {param}, new Object[] {Args.REQUIRED}, true);
      return b.test(v, p[0]);
    });
  }

  static {
    unary("odd", v -> PyOps.eq(PyOps.mod(v, 2L), 1L));
    unary("even", v -> PyOps.eq(PyOps.mod(v, 2L), 0L));
    binary("divisibleby", "num", (v, n) -> PyOps.eq(PyOps.mod(v, n), 0L));
    unary("defined", v -> !(v instanceof Undefined));
    unary("undefined", v -> v instanceof Undefined);
    unary("filter", v -> PyTypes.isStr(v) && Filters.get(PyTypes.str(v)) != null);
    unary("test", v -> PyTypes.isStr(v) && TESTS.containsKey(PyTypes.str(v)));
    unary("none", v -> v == null);
    unary("boolean", v -> v instanceof Boolean);
    unary("false", v -> Boolean.FALSE.equals(v));
    unary("true", v -> Boolean.TRUE.equals(v));
    unary("integer", v -> v instanceof Long || v instanceof java.math.BigInteger);
    unary("float", v -> v instanceof Double);
    unary("lower", v -> PyStr.isLowerStr(PyRepr.str(v)));
    unary("upper", v -> PyStr.isUpperStr(PyRepr.str(v)));
    unary("string", PyTypes::isStr);
    unary("mapping", v -> v instanceof Map);
    unary("number", PyTypes::isNumber);
    unary("sequence", v -> PyOps.hasLen(v) && !(v instanceof LoopContext) && !(v instanceof DictView));
    binary("sameas", "other", (v, o) -> v == o || (v == null && o == null)
        || (v instanceof Boolean && v.equals(o)));
    unary("iterable", PyOps::isIterable);
    unary("callable", v -> v instanceof PyCallable || v instanceof LoopContext);
    unary("escaped", v -> v instanceof Markup);
    binary("in", "seq", (v, s) -> PyOps.contains(s, v));
    Binary eq = PyOps::eq;
    Binary ne = (v, o) -> !PyOps.eq(v, o);
    for (String n : new String[] {"==", "eq", "equalto"}) {
      binary(n, "other", eq);
    }
    for (String n : new String[] {"!=", "ne"}) {
      binary(n, "other", ne);
    }
    for (String n : new String[] {">", "gt", "greaterthan"}) {
      binary(n, "other", (v, o) -> PyOps.compare("gt", v, o));
    }
    for (String n : new String[] {">=", "ge"}) {
      binary(n, "other", (v, o) -> PyOps.compare("gteq", v, o));
    }
    for (String n : new String[] {"<", "lt", "lessthan"}) {
      binary(n, "other", (v, o) -> PyOps.compare("lt", v, o));
    }
    for (String n : new String[] {"<=", "le"}) {
      binary(n, "other", (v, o) -> PyOps.compare("lteq", v, o));
    }
  }

  static Fn get(String name) {
    return TESTS.get(name);
  }

  /** environment.call_test: run a test chosen by name at runtime (select, selectattr...). */
  static boolean call(Frame f, Object name, Object value, List<Object> args, Map<String, Object> kwargs) {
    Fn fn = PyTypes.isStr(name) ? TESTS.get(PyTypes.str(name)) : null;
    if (fn == null) {
      throw new JinjaError("TemplateRuntimeError", "No test named " + (PyTypes.isStr(name)
          ? "'" + PyTypes.str(name) + "'" : "of that type") + ".");
    }
    return fn.test(f, value, args, kwargs);
  }
}
