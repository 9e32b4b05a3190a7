package dev.kvrouter.extproc.template.jinja;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A macro at runtime: the compiled definition plus the frame it was defined in. Arguments bind
 * like jinja2's {@code Macro.__call__}: positional, then keyword, then defaults (evaluated in the
 * macro's own frame, so they may refer to earlier parameters); {@code varargs}, {@code kwargs}
 * and {@code caller} exist only when the body refers to them.
 */
final class MacroValue implements PyCallable {
  private final Stmts.MacroDef def;
  private final Frame closure;

  MacroValue(Stmts.MacroDef def, Frame closure) {
    this.def = def;
    this.closure = closure;
  }

  String name() {
    return def.name;
  }

  Object attribute(String attr) {
    return switch (attr) {
      case "name" -> def.name;
      case "arguments" -> new PyTuple(new ArrayList<>(def.params));
      case "catch_kwargs" -> def.catchKwargs;
      case "catch_varargs" -> def.catchVarargs;
      case "caller" -> def.usesCaller;
      default -> null;
    };
  }

  @Override
  public Object call(Frame caller, List<Object> args, Map<String, Object> kwargs) {
    Render render = caller.render;
    Frame f = new Frame(closure, render);
    int n = def.params.size();
    Map<String, Object> kw = new LinkedHashMap<>(kwargs);
    boolean foundCaller = false;
    Object[] values = new Object[n];
    for (int i = 0; i < n; i++) {
      String p = def.params.get(i);
      if (i < args.size()) {
        values[i] = args.get(i);
      } else {
        values[i] = kw.containsKey(p) ? kw.remove(p) : MISSING;
        if (p.equals("caller")) {
          foundCaller = true;
        }
      }
    }
    if (args.size() >= n && def.params.contains("caller")) {
      foundCaller = true;
    }
    if (def.usesCaller && !foundCaller) {
      Object c = kw.remove("caller");
      f.set("caller", c == null ? Undefined.hint("No caller defined") : c);
    }
    if (def.catchKwargs) {
      f.set("kwargs", new LinkedHashMap<Object, Object>(kw));
    } else if (!kw.isEmpty()) {
      if (kw.containsKey("caller")) {
        throw JinjaError.type("macro '" + def.name + "' was invoked with two values for the special caller argument."
            + " This is most likely a bug.");
      }
      throw JinjaError.type("macro '" + def.name + "' takes no keyword argument '" + kw.keySet().iterator().next() + "'");
    }
    if (def.catchVarargs) {
      f.set("varargs", new PyTuple(args.size() > n ? args.subList(n, args.size()) : List.of()));
    } else if (args.size() > n) {
      throw JinjaError.type("macro '" + def.name + "' takes not more than " + n + " argument(s)");
    }
    for (int i = 0; i < n; i++) {
      Object v = values[i];
      if (v == MISSING) {
        Expr dflt = def.defaults.get(i);
        v = dflt == null ? Undefined.hint("parameter '" + def.params.get(i) + "' was not provided") : dflt.eval(f);
      }
      f.set(def.params.get(i), v);
    }
    render.enterCall();
    try {
      StringBuilder out = new StringBuilder();
      Stmt.execAll(def.body, f, out);
      return out.toString();
    } finally {
      render.exitCall();
    }
  }

  private static final Object MISSING = new Object();
}
