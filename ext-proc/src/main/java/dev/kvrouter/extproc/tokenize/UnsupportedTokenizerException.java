package dev.kvrouter.extproc.tokenize;

import java.util.List;

/**
 * A tokenizer.json feature the pure-Java implementation does not reproduce exactly (detected at load time, so
 * it never silently tokenizes differently). {@link TokenizerLoader} then uses the DJL implementation unless
 * pure Java was required.
 */
public final class UnsupportedTokenizerException extends Exception {
  private static final long serialVersionUID = 1L;

  private final List<String> reasons;

  public UnsupportedTokenizerException(List<String> reasons) {
    super("unsupported tokenizer configuration: " + String.join("; ", reasons));
    this.reasons = List.copyOf(reasons);
  }

  /** Every unsupported feature found, one short sentence each. */
  public List<String> reasons() {
    return reasons;
  }
}
