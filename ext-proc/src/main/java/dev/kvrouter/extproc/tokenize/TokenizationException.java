package dev.kvrouter.extproc.tokenize;

/**
 * Text that cannot be tokenized (for example an unpaired surrogate, which the engine's tokenizer rejects too).
 * The message never contains prompt text. The request path routes such requests by load alone.
 */
public final class TokenizationException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public TokenizationException(String message) {
    super(message);
  }

  public TokenizationException(String message, Throwable cause) {
    super(message, cause);
  }
}
