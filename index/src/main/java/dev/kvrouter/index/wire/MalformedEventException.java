package dev.kvrouter.index.wire;

/** A payload that is not a KV event batch this decoder can read; the subscriber counts it and skips it. */
public final class MalformedEventException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  public MalformedEventException(String message) {
    super(message);
  }

  public MalformedEventException(String message, Throwable cause) {
    super(message, cause);
  }
}
