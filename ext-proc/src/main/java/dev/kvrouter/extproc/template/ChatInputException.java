package dev.kvrouter.extproc.template;

/**
 * The chat request cannot be rendered for reasons transformers or vLLM check before or after the
 * template runs (empty conversation, {@code continue_final_message} together with
 * {@code add_generation_prompt}, a final message the template dropped, reserved kwargs...). Python
 * raises {@code ValueError} or {@code TypeError} in these cases.
 */
public final class ChatInputException extends TemplateException {
  private static final long serialVersionUID = 1L;

  private final String pythonType;

  public ChatInputException(String message) {
    this("ValueError", message);
  }

  public ChatInputException(String pythonType, String message) {
    super(message, 0);
    this.pythonType = pythonType;
  }

  @Override
  public String pythonType() {
    return pythonType;
  }
}
