package dev.kvrouter.extproc.request;

import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.exc.StreamConstraintsException;

/**
 * Jackson's read limits set to what Python's {@code json.loads} accepts, which is what FastAPI runs on a vLLM
 * request body: floats, strings and keys of any length (the body size limit bounds them, and reading them is
 * linear), integers of at most {@link #MAX_INT_DIGITS} digits. Jackson's defaults (1,000-character numbers,
 * 50,000-character keys) would refuse bodies vLLM serves. The integer limit is Python's own guard against the
 * quadratic cost of converting long digit strings; checking it at tokenizing refuses such a body before any
 * conversion, wherever the integer sits, exactly as Python does.
 */
final class PythonJsonLimits extends StreamReadConstraints {
  private static final long serialVersionUID = 1L;

  /** Python's {@code sys.int_info.default_max_str_digits}: longer integers make {@code json.loads} raise. */
  static final int MAX_INT_DIGITS = 4300;

  /** An integer longer than Python reads; its message is the client's error. */
  static final class IntegerTooLong extends StreamConstraintsException {
    private static final long serialVersionUID = 1L;

    IntegerTooLong(int digits) {
      super("request body has an integer of " + digits + " digits; JSON integers are limited to " + MAX_INT_DIGITS
          + " digits (Python's int_max_str_digits)");
    }
  }

  /** @param maxNestingDepth deepest nesting accepted (Python's own limit depends on its stack) */
  PythonJsonLimits(int maxNestingDepth) {
    super(maxNestingDepth, -1L, Integer.MAX_VALUE, Integer.MAX_VALUE, Integer.MAX_VALUE, -1L);
  }

  @Override
  public void validateIntegerLength(int length) throws StreamConstraintsException {
    if (length > MAX_INT_DIGITS) {
      throw new IntegerTooLong(length);
    }
  }
}
