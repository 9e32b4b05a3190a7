package dev.kvrouter.extproc.template.jinja;

/**
 * jinja2's default {@code Undefined}: prints as nothing, is falsy, iterates as empty, and fails
 * with {@code UndefinedError} on any other use (attribute access, arithmetic, calls).
 *
 * <p>The message names what was looked up. Attribute names come from the template; a subscript
 * key that came from data is not repeated (see {@link #elementOf}).
 */
final class Undefined {
  /** Undefined produced for an unsafe attribute: fails with {@code SecurityError} when used. */
  private final boolean security;
  private final String message;

  private Undefined(String message, boolean security) {
    this.message = message;
    this.security = security;
  }

  /** A missing variable. */
  public static Undefined name(String name) {
    return new Undefined("'" + name + "' is undefined", false);
  }

  /** An attribute the object does not have. */
  public static Undefined attributeOf(Object obj, String attr) {
    return new Undefined("'" + PyTypes.objectTypeRepr(obj) + "' has no attribute '" + attr + "'", false);
  }

  /** A missing subscript; the key is named only when it is a template constant. */
  public static Undefined elementOf(Object obj, Object key, boolean keyFromTemplate) {
    if (key instanceof String s) {
      return new Undefined("'" + PyTypes.objectTypeRepr(obj) + "' has no attribute '"
          + (keyFromTemplate ? s : "<key withheld>") + "'", false);
    }
    return new Undefined(PyTypes.objectTypeRepr(obj) + " has no element "
        + (keyFromTemplate ? PyRepr.repr(key) : "<key withheld>"), false);
  }

  /** An undefined value with an explicit hint, e.g. "there is no previous item". */
  public static Undefined hint(String hint) {
    return new Undefined(hint, false);
  }

  /** An attribute the sandbox refuses, such as {@code list.append}. */
  public static Undefined unsafe(Object obj, String attr) {
    return new Undefined("access to attribute '" + attr + "' of '" + PyTypes.typeName(obj)
        + "' object is unsafe.", true);
  }

  public String message() {
    return message;
  }

  /** The error jinja2 raises when this value is used. */
  public RuntimeException fail() {
    return security ? new JinjaError("SecurityError", message) : new JinjaError("UndefinedError", message);
  }

  @Override
  public String toString() {
    return "";
  }
}
