package dev.kvrouter.extproc.tokenize;

import java.util.ArrayList;
import java.util.List;

/**
 * A tokenizer that splits the prompt at added tokens (exactly where tokenizers' {@code AddedVocabulary}
 * splits it), encodes each text segment with a {@link SegmentEncoder} (pure Java or DJL), caches segment
 * ids in a shared {@link SegmentCache}, and applies the post-processor's prefix and suffix.
 *
 * <p>Thread-safe: all fields are immutable or thread-safe; per-call state lives in the {@link Cursor}.
 */
final class SegmentedTokenizer implements Tokenizer {
  private final String name;
  private final String implementation;
  private final long fingerprint;
  private final AddedTokenMatcher addedTokens;
  private final SegmentEncoder encoder;
  private final PostProcessor post;
  private final SegmentCache cache;
  private final CharsPerTokenEstimator estimator;
  private final AutoCloseable resources;

  SegmentedTokenizer(String name, String implementation, long fingerprint, AddedTokenMatcher addedTokens,
      SegmentEncoder encoder, PostProcessor post, SegmentCache cache, CharsPerTokenEstimator estimator,
      AutoCloseable resources) {
    this.name = name;
    this.implementation = implementation;
    this.fingerprint = fingerprint;
    this.addedTokens = addedTokens;
    this.encoder = encoder;
    this.post = post;
    this.cache = cache;
    this.estimator = estimator;
    this.resources = resources;
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public String implementation() {
    return implementation;
  }

  @Override
  public long fingerprint() {
    return fingerprint;
  }

  @Override
  public int[] encode(CharSequence text, boolean addSpecialTokens) {
    return new Cursor(text, addSpecialTokens, cache, null).finish();
  }

  @Override
  public int[] encodeTruncatedLeft(CharSequence text, boolean addSpecialTokens, int maxLength) {
    return post.truncateLeft(encode(text, false), addSpecialTokens, maxLength);
  }

  @Override
  public TokenCursor cursor(CharSequence text, boolean addSpecialTokens) {
    return new Cursor(text, addSpecialTokens, cache, null);
  }

  @Override
  public TokenCursor cursor(CharSequence text, boolean addSpecialTokens, int[] buffer) {
    return new Cursor(text, addSpecialTokens, cache, buffer);
  }

  /** Encodes without reading or filling the segment cache (calibration, tests). */
  int[] encodeUncached(CharSequence text, boolean addSpecialTokens) {
    return new Cursor(text, addSpecialTokens, null, null).finish();
  }

  @Override
  public List<Segment> segments(CharSequence text) {
    List<Segment> out = new ArrayList<>();
    int pos = 0;
    int len = text.length();
    while (pos < len) {
      long m = addedTokens.find(text, pos, len);
      int gapEnd = m == AddedTokenMatcher.NONE ? len : AddedTokenMatcher.start(m);
      if (pos < gapEnd) {
        out.add(new Segment(pos, gapEnd, -1));
      }
      if (m == AddedTokenMatcher.NONE) {
        break;
      }
      out.add(new Segment(gapEnd, addedTokens.end(m), addedTokens.id(m)));
      pos = addedTokens.end(m);
    }
    return out;
  }

  @Override
  public CharsPerTokenEstimator charsPerToken() {
    return estimator;
  }

  @Override
  public void close() {
    if (resources != null) {
      try {
        resources.close();
      } catch (Exception e) {
        throw new IllegalStateException("closing tokenizer " + name, e);
      }
    }
  }

  /** One prompt's encoding state. Owned by one thread at a time. */
  private final class Cursor implements TokenCursor {
    private static final long UNSCANNED = -2L;

    private final CharSequence text;
    private final int len;
    private final boolean addSpecialTokens;
    private final SegmentCache cache;
    private final IntList out;
    private final SegmentEncoder.Scratch scratch = new SegmentEncoder.Scratch();
    private final AddedTokenMatcher.Scanner scanner;
    private int scan;
    private long pendingMatch = UNSCANNED;
    private SegmentEncoder.Job job;
    private int jobChars;
    private int jobStart;
    private int jobOutStart;
    private SegmentCache.Key jobKey;
    private boolean complete;

    Cursor(CharSequence text, boolean addSpecialTokens, SegmentCache cache, int[] buffer) {
      this.text = text;
      this.cache = cache;
      this.len = text.length();
      this.addSpecialTokens = addSpecialTokens;
      // Sized from the estimate (plus 15%) so a long prompt grows its buffer at most once; a caller's buffer is
      // used when it is at least that large.
      this.out = new IntList(buffer, 16 + (int) (len / estimator.charsPerToken() * 1.15));
      this.scanner = addedTokens.new Scanner(text);
      if (addSpecialTokens) {
        out.addAll(post.prefix());
      }
    }

    @Override
    public int advance(int minNewTokens) {
      long target = Math.min(Integer.MAX_VALUE, (long) out.size() + Math.max(1, minNewTokens));
      while (!complete && out.size() < target) {
        step((int) target);
      }
      return out.size();
    }

    private void step(int target) {
      if (job != null) {
        if (job.run(out, target)) {
          endJob();
        }
        return;
      }
      if (pendingMatch == UNSCANNED) {
        pendingMatch = scan < len ? scanner.find(scan) : AddedTokenMatcher.NONE;
      }
      int gapEnd = pendingMatch == AddedTokenMatcher.NONE ? len : AddedTokenMatcher.start(pendingMatch);
      if (scan < gapEnd) {
        int start = scan;
        scan = gapEnd;
        beginSegment(start, gapEnd, target);
      } else if (pendingMatch != AddedTokenMatcher.NONE) {
        out.add(addedTokens.id(pendingMatch));
        scan = addedTokens.end(pendingMatch);
        pendingMatch = UNSCANNED;
      } else {
        if (addSpecialTokens) {
          out.addAll(post.suffix());
        }
        complete = true;
      }
    }

    private void beginSegment(int start, int end, int target) {
      SegmentCache.Key key = null;
      if (cache != null && end - start >= cache.minSegmentChars()) {
        key = cache.key(fingerprint, text, start, end);
        int[] ids = cache.get(key, text, start, end);
        if (ids != null) {
          out.addAll(ids);
          return;
        }
      }
      job = encoder.begin(text, start, end, scratch);
      jobChars = end - start;
      jobStart = start;
      jobOutStart = out.size();
      jobKey = key;
      if (job.run(out, target)) {
        endJob();
      }
    }

    private void endJob() {
      int tokens = out.size() - jobOutStart;
      if (jobKey != null) {
        cache.put(jobKey, text, jobStart, out.copyRange(jobOutStart, out.size()));
      }
      estimator.observe(jobChars, tokens);
      job = null;
      jobKey = null;
    }

    @Override
    public boolean isComplete() {
      return complete;
    }

    @Override
    public int tokenCount() {
      return out.size();
    }

    @Override
    public int[] tokens() {
      return out.array();
    }

    @Override
    public int remainingChars() {
      if (complete) {
        return 0;
      }
      return (job != null ? job.remainingChars() : 0) + (len - scan);
    }

    @Override
    public long estimatedTotalTokens() {
      if (complete) {
        return out.size();
      }
      long total = out.size();
      if (job != null) {
        total += estimator.estimateTokens(job.remainingChars());
      }
      int pos = scan;
      long pending = pendingMatch;
      while (pos < len) {
        long m = pending != UNSCANNED ? pending : addedTokens.find(text, pos, len);
        pending = UNSCANNED;
        int gapEnd = m == AddedTokenMatcher.NONE ? len : AddedTokenMatcher.start(m);
        total += estimator.estimateTokens(gapEnd - pos);
        if (m == AddedTokenMatcher.NONE) {
          break;
        }
        total++;
        pos = addedTokens.end(m);
      }
      if (addSpecialTokens) {
        total += post.suffix().length;
      }
      return total;
    }

    @Override
    public int[] finish() {
      while (!complete) {
        step(Integer.MAX_VALUE);
      }
      return out.toArray();
    }
  }
}
