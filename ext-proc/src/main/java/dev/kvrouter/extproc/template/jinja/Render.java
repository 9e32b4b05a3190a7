package dev.kvrouter.extproc.template.jinja;

import dev.kvrouter.extproc.template.RenderLimits;
import java.util.Map;

/** Per-render state: globals, and the counters that enforce {@link RenderLimits}. */
final class Render {
  final Map<String, Object> globals;
  private final RenderLimits limits;
  private long chars;
  private long iterations;
  private int depth;

  Render(Map<String, Object> globals, RenderLimits limits) {
    this.globals = globals;
    this.limits = limits;
  }

  void wrote(int n) {
    chars += n;
    if (chars > limits.maxOutputChars()) {
      throw new JinjaError("LimitExceeded", "render produced more than " + limits.maxOutputChars() + " characters");
    }
  }

  void step() {
    if (++iterations > limits.maxIterations()) {
      throw new JinjaError("LimitExceeded", "render exceeded " + limits.maxIterations() + " loop iterations");
    }
  }

  void enterCall() {
    if (++depth > limits.maxCallDepth()) {
      depth--;
      throw new JinjaError("RecursionError", "macro calls nested deeper than " + limits.maxCallDepth());
    }
  }

  void exitCall() {
    depth--;
  }
}
