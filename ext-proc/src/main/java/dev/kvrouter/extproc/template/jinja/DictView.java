package dev.kvrouter.extproc.template.jinja;

import java.util.Map;

/** {@code dict.keys()}, {@code dict.values()} or {@code dict.items()}: a live, re-iterable view. */
record DictView(Map<Object, Object> map, Kind kind) {
  enum Kind { KEYS, VALUES, ITEMS }

  String typeName() {
    return switch (kind) {
      case KEYS -> "dict_keys";
      case VALUES -> "dict_values";
      case ITEMS -> "dict_items";
    };
  }
}
