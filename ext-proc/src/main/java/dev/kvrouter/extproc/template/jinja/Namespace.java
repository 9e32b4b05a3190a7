package dev.kvrouter.extproc.template.jinja;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The object {@code namespace(...)} returns: the one mutable value a template may change across
 * loop iterations with {@code {% set ns.attr = value %}}. transformers refuses attribute names
 * starting with an underscore.
 */
final class Namespace {
  final Map<String, Object> attrs = new LinkedHashMap<>();

  void set(String name, Object value) {
    checkName(name);
    attrs.put(name, value);
  }

  static void checkName(Object name) {
    if (name instanceof String s && s.startsWith("_")) {
      throw new JinjaError("SecurityError", "Chat templates cannot store underscore-prefixed attributes on a"
          + " namespace, but got '" + s + "'. Please rename the attribute.");
    }
  }
}
