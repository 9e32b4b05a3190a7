package dev.kvrouter.extproc.tokenize;

/**
 * Encodes a segment with DJL ({@code add_special_tokens=false}), all at once. Exact because the segment
 * holds no raw added token, so DJL's own added-token pass sees only what tokenizers would see inside it.
 * Thread-safe.
 */
final class DjlSegmentEncoder implements SegmentEncoder {
  private final DjlEngine engine;

  DjlSegmentEncoder(DjlEngine engine) {
    this.engine = engine;
  }

  @Override
  public Job begin(CharSequence text, int start, int end, Scratch scratch) {
    String segment = text.subSequence(start, end).toString();
    return new Job() {
      private boolean done;

      @Override
      public boolean run(IntList out, int target) {
        if (!done) {
          out.addAll(engine.encode(segment, false));
          done = true;
        }
        return true;
      }

      @Override
      public int remainingChars() {
        return done ? 0 : segment.length();
      }
    };
  }
}
