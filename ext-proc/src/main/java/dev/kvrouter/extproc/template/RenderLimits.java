package dev.kvrouter.extproc.template;

/**
 * Bounds on one render, so a hostile template or request cannot exhaust memory or CPU.
 *
 * @param maxOutputChars characters a render may produce in total (all buffers, macros included)
 * @param maxIterations loop iterations and filter steps a render may perform
 * @param maxCallDepth nesting depth of macro calls
 */
public record RenderLimits(int maxOutputChars, long maxIterations, int maxCallDepth) {

  /** Generous defaults: 32 MiB of output, 50 million iterations, macro depth 200. */
  public static final RenderLimits DEFAULT = new RenderLimits(32 << 20, 50_000_000L, 200);

  public RenderLimits {
    if (maxOutputChars <= 0 || maxIterations <= 0 || maxCallDepth <= 0) {
      throw new IllegalArgumentException("limits must be positive");
    }
  }
}
