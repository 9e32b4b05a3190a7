package dev.kvrouter.extproc.template.jinja;

import java.util.Map;

/**
 * One scope of variables. jinja2 scoping, reproduced: the template root holds the render
 * variables and top-level {@code set}s; every loop iteration, macro call, {@code with} and block
 * {@code set} body gets a fresh child frame, so assignments there do not leak out (nor into the
 * next iteration); {@code if} opens no scope. Only namespaces carry state across iterations.
 *
 * <p>Frames hold a handful of names (a loop target and {@code loop}, a few {@code set}s), so a
 * short array scanned linearly beats a hash map here; the root frame delegates to the render
 * variables map for everything it did not assign itself.
 *
 * <p>Not thread-safe: a frame belongs to one render on one thread.
 */
final class Frame {
  static final Object MISSING = new Object();

  final Frame parent;
  final Render render;
  private final Map<String, Object> base;
  private String[] names;
  private Object[] values;
  private int size;

  Frame(Frame parent, Render render) {
    this.parent = parent;
    this.render = render;
    this.base = null;
  }

  Frame(Render render, Map<String, Object> initial) {
    this.parent = null;
    this.render = render;
    this.base = initial;
  }

  Frame child() {
    return new Frame(this, render);
  }

  private int indexOf(String name) {
    for (int i = size - 1; i >= 0; i--) {
      String n = names[i];
      if (n == name || n.equals(name)) {
        return i;
      }
    }
    return -1;
  }

  Object lookup(String name) {
    for (Frame f = this; f != null; f = f.parent) {
      int i = f.indexOf(name);
      if (i >= 0) {
        return f.values[i];
      }
      if (f.base != null) {
        Object v = f.base.get(name);
        if (v != null || f.base.containsKey(name)) {
          return v;
        }
      }
    }
    Object g = render.globals.get(name);
    return g != null ? g : MISSING;
  }

  void set(String name, Object value) {
    int i = indexOf(name);
    if (i >= 0) {
      values[i] = value;
      return;
    }
    if (names == null) {
      names = new String[4];
      values = new Object[4];
    } else if (size == names.length) {
      names = java.util.Arrays.copyOf(names, size * 2);
      values = java.util.Arrays.copyOf(values, size * 2);
    }
    names[size] = name;
    values[size++] = value;
  }
}
