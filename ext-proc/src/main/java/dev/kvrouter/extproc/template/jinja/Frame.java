package dev.kvrouter.extproc.template.jinja;

import java.util.HashMap;
import java.util.Map;

/**
 * One scope of variables. jinja2 scoping, reproduced: the template root holds the render
 * variables and top-level {@code set}s; every loop iteration, macro call, {@code with} and block
 * {@code set} body gets a fresh child frame, so assignments there do not leak out (nor into the
 * next iteration); {@code if} opens no scope. Only namespaces carry state across iterations.
 *
 * <p>Not thread-safe: a frame belongs to one render on one thread.
 */
final class Frame {
  static final Object MISSING = new Object();

  final Frame parent;
  final Render render;
  private Map<String, Object> vars;

  Frame(Frame parent, Render render) {
    this.parent = parent;
    this.render = render;
  }

  Frame(Render render, Map<String, Object> initial) {
    this.parent = null;
    this.render = render;
    this.vars = new HashMap<>(initial);
  }

  Frame child() {
    return new Frame(this, render);
  }

  Object lookup(String name) {
    for (Frame f = this; f != null; f = f.parent) {
      if (f.vars != null) {
        Object v = f.vars.get(name);
        if (v != null || f.vars.containsKey(name)) {
          return v;
        }
      }
    }
    Object g = render.globals.get(name);
    return g != null ? g : MISSING;
  }

  void set(String name, Object value) {
    if (vars == null) {
      vars = new HashMap<>(8);
    }
    vars.put(name, value);
  }
}
