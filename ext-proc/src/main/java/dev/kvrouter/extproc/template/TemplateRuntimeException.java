package dev.kvrouter.extproc.template;

/**
 * Rendering failed the way Python would fail: a {@code TypeError}, {@code ValueError},
 * {@code UndefinedError}, {@code SecurityError} and so on. {@link #pythonType()} names the Python
 * exception class so golden tests can check that both sides fail alike.
 */
public class TemplateRuntimeException extends TemplateException {
  private static final long serialVersionUID = 1L;

  private final String pythonType;

  public TemplateRuntimeException(String pythonType, String message, int line) {
    super(message, line);
    this.pythonType = pythonType;
  }

  @Override
  public String pythonType() {
    return pythonType;
  }
}
