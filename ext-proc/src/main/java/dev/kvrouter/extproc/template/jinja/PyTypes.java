package dev.kvrouter.extproc.template.jinja;

import java.math.BigInteger;
import java.util.List;
import java.util.Map;

/**
 * The Python type of a Java value inside the interpreter. Canonical forms: {@code null} (None),
 * {@link Boolean}, {@link Long} or {@link BigInteger} (int), {@link Double} (float),
 * {@link String} or {@link Markup} (str), {@link List} (list), {@link PyTuple}, {@link Map}
 * (dict), plus the runtime types of this package.
 */
final class PyTypes {
  private PyTypes() {}

  static boolean isStr(Object o) {
    return o instanceof String || o instanceof Markup;
  }

  /** The text of a str value (plain or markup). Caller checked {@link #isStr}. */
  static String str(Object o) {
    return o instanceof Markup m ? m.text : (String) o;
  }

  static boolean isInt(Object o) {
    return o instanceof Long || o instanceof BigInteger || o instanceof Boolean;
  }

  static boolean isNumber(Object o) {
    return o instanceof Long || o instanceof Double || o instanceof BigInteger || o instanceof Boolean;
  }

  static String typeName(Object o) {
    if (o == null) {
      return "NoneType";
    }
    if (o instanceof Boolean) {
      return "bool";
    }
    if (o instanceof Long || o instanceof BigInteger) {
      return "int";
    }
    if (o instanceof Double) {
      return "float";
    }
    if (o instanceof String) {
      return "str";
    }
    if (o instanceof Markup) {
      return "Markup";
    }
    if (o instanceof List) {
      return "list";
    }
    if (o instanceof PyTuple) {
      return "tuple";
    }
    if (o instanceof Map) {
      return "dict";
    }
    if (o instanceof Undefined) {
      return "Undefined";
    }
    if (o instanceof Namespace) {
      return "TemplateNamespace";
    }
    if (o instanceof PyIterator it) {
      return it.kind;
    }
    if (o instanceof DictView v) {
      return v.typeName();
    }
    if (o instanceof PyRange) {
      return "range";
    }
    if (o instanceof LoopContext) {
      return "LoopContext";
    }
    if (o instanceof MacroValue) {
      return "Macro";
    }
    if (o instanceof PyCallable) {
      return "builtin_function_or_method";
    }
    return o.getClass().getSimpleName();
  }

  /** jinja2.utils.object_type_repr. */
  static String objectTypeRepr(Object o) {
    if (o == null) {
      return "None";
    }
    return typeName(o) + " object";
  }
}
