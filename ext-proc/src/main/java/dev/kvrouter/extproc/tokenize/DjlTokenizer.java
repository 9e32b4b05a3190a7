package dev.kvrouter.extproc.tokenize;

import java.util.List;

/**
 * Whole-prompt DJL encoding, for tokenizer.json files whose added-token extraction we cannot reproduce
 * (so segments cannot be cut and cached safely). Exact but uncached; the cursor encodes everything on its
 * first advance. Thread-safe.
 */
final class DjlTokenizer implements Tokenizer {
  private final String name;
  private final long fingerprint;
  private final DjlEngine engine;
  private final CharsPerTokenEstimator estimator;
  private final PostProcessor post;

  /** @param post the post-processor when we understand it, else null (truncation with special tokens unknown) */
  DjlTokenizer(String name, long fingerprint, DjlEngine engine, CharsPerTokenEstimator estimator,
      PostProcessor post) {
    this.name = name;
    this.fingerprint = fingerprint;
    this.engine = engine;
    this.estimator = estimator;
    this.post = post;
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public String implementation() {
    return "djl";
  }

  @Override
  public long fingerprint() {
    return fingerprint;
  }

  @Override
  public int[] encode(CharSequence text, boolean addSpecialTokens) {
    int[] ids = engine.encode(text.toString(), addSpecialTokens);
    estimator.observe(text.length(), ids.length);
    return ids;
  }

  @Override
  public int[] encodeTruncatedLeft(CharSequence text, boolean addSpecialTokens, int maxLength) {
    PostProcessor frame = post != null ? post : addSpecialTokens ? null : PostProcessor.NONE;
    return frame == null ? null : frame.truncateLeft(encode(text, false), addSpecialTokens, maxLength);
  }

  @Override
  public TokenCursor cursor(CharSequence text, boolean addSpecialTokens) {
    return new TokenCursor() {
      private int[] ids;

      @Override
      public int advance(int minNewTokens) {
        return finish().length;
      }

      @Override
      public boolean isComplete() {
        return ids != null;
      }

      @Override
      public int tokenCount() {
        return ids == null ? 0 : ids.length;
      }

      @Override
      public int[] tokens() {
        return ids == null ? new int[0] : ids;
      }

      @Override
      public int remainingChars() {
        return ids == null ? text.length() : 0;
      }

      @Override
      public long estimatedTotalTokens() {
        return ids == null ? estimator.estimateTokens(text.length()) : ids.length;
      }

      @Override
      public int[] finish() {
        if (ids == null) {
          ids = encode(text, addSpecialTokens);
        }
        return ids.clone();
      }
    };
  }

  @Override
  public List<Segment> segments(CharSequence text) {
    return text.length() == 0 ? List.of() : List.of(new Segment(0, text.length(), -1));
  }

  @Override
  public CharsPerTokenEstimator charsPerToken() {
    return estimator;
  }

  @Override
  public void close() {
    engine.close();
  }
}
