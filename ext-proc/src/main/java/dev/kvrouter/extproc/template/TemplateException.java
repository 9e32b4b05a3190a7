package dev.kvrouter.extproc.template;

/**
 * Base of every error raised while compiling or rendering a chat template.
 *
 * <p>Messages are built from the template's own source (tag names, attribute names, literal
 * strings) and from Python type names, never from request data: a failed render can be logged
 * without leaking prompt text. {@link #line()} is the template line the error points at, or 0.
 */
public abstract class TemplateException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int line;

  protected TemplateException(String message, int line) {
    super(line > 0 ? message + " (template line " + line + ")" : message, null, false, false);
    this.line = line;
  }

  /** Template line the error points at (1-based), or 0 when unknown. */
  public int line() {
    return line;
  }

  /** Name of the Python exception class jinja2/transformers raise in the same situation. */
  public abstract String pythonType();
}
