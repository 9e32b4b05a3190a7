package dev.kvrouter.extproc.template;

/** The template source does not compile (jinja2 {@code TemplateSyntaxError} and friends). */
public final class TemplateSyntaxException extends TemplateException {
  private static final long serialVersionUID = 1L;

  public TemplateSyntaxException(String message, int line) {
    super(message, line);
  }

  @Override
  public String pythonType() {
    return "TemplateSyntaxError";
  }
}
