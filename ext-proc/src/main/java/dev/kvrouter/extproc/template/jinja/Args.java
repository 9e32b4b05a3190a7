package dev.kvrouter.extproc.template.jinja;

import java.util.List;
import java.util.Map;

/** Binds Python-style call arguments to parameter slots, with Python's error messages. */
final class Args {
  private Args() {}

  /** Marks a parameter without default. */
  static final Object REQUIRED = new Object();

  /**
   * @param names parameter names (after the bound self/value)
   * @param defaults default per parameter, {@link #REQUIRED} when mandatory
   * @param keywords whether parameters may be passed by keyword
   */
  static Object[] bind(String fn, List<Object> args, Map<String, Object> kwargs, String[] names, Object[] defaults,
      boolean keywords) {
    if (args.size() > names.length) {
      throw JinjaError.type(fn + "() takes at most " + names.length + " argument" + (names.length == 1 ? "" : "s")
          + " (" + args.size() + " given)");
    }
    Object[] out = new Object[names.length];
    for (int i = 0; i < names.length; i++) {
      out[i] = i < args.size() ? args.get(i) : REQUIRED;
    }
    if (!kwargs.isEmpty()) {
      if (!keywords) {
        throw JinjaError.type(fn + "() takes no keyword arguments");
      }
      for (Map.Entry<String, Object> e : kwargs.entrySet()) {
        int idx = indexOf(names, e.getKey());
        if (idx < 0) {
          throw JinjaError.type(fn + "() got an unexpected keyword argument '" + e.getKey() + "'");
        }
        if (out[idx] != REQUIRED) {
          throw JinjaError.type(fn + "() got multiple values for argument '" + e.getKey() + "'");
        }
        out[idx] = e.getValue();
      }
    }
    for (int i = 0; i < names.length; i++) {
      if (out[i] == REQUIRED) {
        if (defaults[i] == REQUIRED) {
          throw JinjaError.type(fn + "() missing required argument: '" + names[i] + "'");
        }
        out[i] = defaults[i];
      }
    }
    return out;
  }

  private static int indexOf(String[] names, String n) {
    for (int i = 0; i < names.length; i++) {
      if (names[i].equals(n)) {
        return i;
      }
    }
    return -1;
  }

  static void none(String fn, List<Object> args, Map<String, Object> kwargs) {
    if (!args.isEmpty() || !kwargs.isEmpty()) {
      throw JinjaError.type(fn + "() takes no arguments (" + (args.size() + kwargs.size()) + " given)");
    }
  }

  static String str(String fn, Object v) {
    if (PyTypes.isStr(v)) {
      return PyTypes.str(v);
    }
    if (v instanceof Undefined u) {
      throw u.fail();
    }
    throw JinjaError.type(fn + "() argument must be str, not " + PyTypes.typeName(v));
  }

  static String strOrNone(String fn, Object v) {
    return v == null ? null : str(fn, v);
  }
}
