package dev.kvrouter.extproc.template.jinja;

/**
 * A Python-level error raised deep inside value operations, before the line number is known.
 * The evaluator converts it into a {@code TemplateRuntimeException} carrying the line of the node
 * being evaluated. No stack trace: these are control flow for bad input, not bugs.
 */
final class JinjaError extends RuntimeException {
  private static final long serialVersionUID = 1L;

  final String pythonType;

  JinjaError(String pythonType, String message) {
    super(message, null, false, false);
    this.pythonType = pythonType;
  }

  static JinjaError type(String message) {
    return new JinjaError("TypeError", message);
  }

  static JinjaError value(String message) {
    return new JinjaError("ValueError", message);
  }
}
