package dev.kvrouter.extproc.template;

/**
 * The template called {@code raise_exception(msg)} (transformers raises jinja2's
 * {@code TemplateError}). Typically the conversation breaks a rule of the model, such as roles
 * that must alternate.
 *
 * <p>The message is kept only when the template passed a string literal, so a message built from
 * request data (some templates append a tool call id) is never carried.
 */
public final class RaisedTemplateException extends TemplateException {
  private static final long serialVersionUID = 1L;

  private final boolean literalMessage;

  public RaisedTemplateException(String templateMessage, int line) {
    super(templateMessage == null
        ? "chat template raised an error (message built from request data withheld)"
        : "chat template raised: " + templateMessage, line);
    this.literalMessage = templateMessage != null;
  }

  /** True when the message is the template's own literal text. */
  public boolean hasLiteralMessage() {
    return literalMessage;
  }

  @Override
  public String pythonType() {
    return "TemplateError";
  }
}
