package dev.kvrouter.extproc.tokenize;

/**
 * The pure-Java segment pipeline: normalizer, normalized added tokens, pre-tokenizer, BPE. A segment is
 * first cut into pieces (words and normalized added tokens, with their boundaries in the caller's
 * {@link SegmentEncoder.Scratch}), then the pieces are encoded in order, so a caller can stop after any word with exact ids
 * so far. Thread-safe; jobs are not.
 */
final class BpeSegmentEncoder implements SegmentEncoder {
  private final TextNormalizer normalizer;
  private final AddedTokenMatcher normalizedTokens;
  private final PreTokenizer preTokenizer;
  private final BpeModel model;
  private final SegmentEncoder fallback;

  /**
   * @param fallback encodes segments Java's Unicode tables cannot normalize exactly (newer code points
   *     under NFC), or null to fail those with a {@link TokenizationException}
   */
  BpeSegmentEncoder(TextNormalizer normalizer, AddedTokenMatcher normalizedTokens, PreTokenizer preTokenizer,
      BpeModel model, SegmentEncoder fallback) {
    this.normalizer = normalizer;
    this.normalizedTokens = normalizedTokens;
    this.preTokenizer = preTokenizer;
    this.model = model;
    this.fallback = fallback;
  }

  @Override
  public Job begin(CharSequence text, int start, int end, Scratch scratch) {
    TextNormalizer.Span span;
    try {
      span = normalizer.normalize(text, start, end);
    } catch (TextNormalizer.BeyondJavaUnicodeException e) {
      if (fallback == null) {
        throw new TokenizationException("text has code points newer than this JVM's Unicode tables");
      }
      return fallback.begin(text, start, end, scratch);
    }
    IntList ends = scratch.pieceEnds;
    IntList ids = scratch.pieceIds;
    ends.clear();
    ids.clear();
    CharSequence s = span.text();
    int pos = span.start();
    int stop = span.end();
    while (pos < stop) {
      long m = normalizedTokens.find(s, pos, stop);
      int gapEnd = m == AddedTokenMatcher.NONE ? stop : AddedTokenMatcher.start(m);
      preTokenizer.split(s, pos, gapEnd, ends);
      while (ids.size() < ends.size()) {
        ids.add(-1);
      }
      if (m == AddedTokenMatcher.NONE) {
        break;
      }
      ends.add(normalizedTokens.end(m));
      ids.add(normalizedTokens.id(m));
      pos = normalizedTokens.end(m);
    }
    return new BpeJob(s, span.start(), ends, ids, scratch.bpe);
  }

  private final class BpeJob implements Job {
    private final CharSequence s;
    private final IntList ends;
    private final IntList ids;
    private final BpeModel.Scratch bpe;
    private final int stop;
    private int next;
    private int pos;

    BpeJob(CharSequence s, int start, IntList ends, IntList ids, BpeModel.Scratch bpe) {
      this.s = s;
      this.pos = start;
      this.ends = ends;
      this.ids = ids;
      this.bpe = bpe;
      this.stop = ends.size() == 0 ? start : ends.get(ends.size() - 1);
    }

    @Override
    public boolean run(IntList out, int target) {
      int n = ends.size();
      int[] e = ends.array();
      int[] id = ids.array();
      while (next < n) {
        if (out.size() >= target) {
          return false;
        }
        int end = e[next];
        if (id[next] >= 0) {
          out.add(id[next]);
        } else {
          model.encodeWord(s, pos, end, bpe, out);
        }
        pos = end;
        next++;
      }
      return true;
    }

    @Override
    public int remainingChars() {
      return stop - pos;
    }
  }
}
