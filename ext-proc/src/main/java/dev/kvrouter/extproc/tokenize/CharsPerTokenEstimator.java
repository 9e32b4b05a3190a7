package dev.kvrouter.extproc.tokenize;

/**
 * Characters per token of one tokenizer, to estimate the length of text not tokenized yet: seeded by a
 * calibration sample at load, then an exponential moving average over segments actually tokenized (segments
 * of at least {@link #MIN_OBSERVED_CHARS}), so it follows the traffic's language and content mix.
 *
 * <p>Thread-safe: a volatile double updated without a lock; a lost update under contention only delays
 * convergence slightly.
 */
public final class CharsPerTokenEstimator {
  /** Shorter segments say little about the ratio. */
  public static final int MIN_OBSERVED_CHARS = 64;

  /** Used when nothing better is known: typical of English under modern BPE vocabularies. */
  public static final double DEFAULT_CHARS_PER_TOKEN = 4.0;

  private static final double MIN = 0.5;
  private static final double MAX = 16.0;

  private final double alpha;
  private volatile double ratio;

  /**
   * @param initial the starting ratio (clamped to [0.5, 16])
   * @param alpha weight of each new observation, in (0, 1]
   */
  public CharsPerTokenEstimator(double initial, double alpha) {
    if (!(alpha > 0 && alpha <= 1)) {
      throw new IllegalArgumentException("alpha must be in (0, 1], was " + alpha);
    }
    this.alpha = alpha;
    this.ratio = clamp(Double.isFinite(initial) ? initial : DEFAULT_CHARS_PER_TOKEN);
  }

  private static double clamp(double r) {
    return Math.max(MIN, Math.min(MAX, r));
  }

  public double charsPerToken() {
    return ratio;
  }

  /** Estimated tokens of {@code chars} characters of text (0 for none, at least 1 otherwise). */
  public long estimateTokens(long chars) {
    if (chars <= 0) {
      return 0;
    }
    return Math.max(1, Math.round(chars / ratio));
  }

  /** Replaces the estimate outright (calibration at load). */
  void seed(int chars, int tokens) {
    if (chars > 0 && tokens > 0) {
      ratio = clamp((double) chars / tokens);
    }
  }

  /**
   * Replaces the estimate with {@code charsPerToken} (clamped to [0.5, 16]): a replay (the virtual-time A/B) that
   * must start every run from the same estimate, whatever was tokenized before it.
   */
  public void reset(double charsPerToken) {
    ratio = clamp(Double.isFinite(charsPerToken) ? charsPerToken : DEFAULT_CHARS_PER_TOKEN);
  }

  /** Folds in a segment of {@code chars} characters that tokenized to {@code tokens} tokens. */
  public void observe(int chars, int tokens) {
    if (chars < MIN_OBSERVED_CHARS || tokens <= 0) {
      return;
    }
    double r = ratio;
    ratio = clamp(r + alpha * ((double) chars / tokens - r));
  }
}
