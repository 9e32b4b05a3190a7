package dev.kvrouter.extproc.tokenize;

/**
 * Encodes one segment: text between two added tokens (non-normalized ones; normalized added tokens inside
 * are the encoder's business). Segments tokenize independently, which is what makes them cacheable.
 * Implementations are immutable and thread-safe; a {@link Job} belongs to one caller.
 */
interface SegmentEncoder {

  /** Begins encoding the segment {@code text[start, end)}. */
  Job begin(CharSequence text, int start, int end, Scratch scratch);

  /** An encoding in progress, resumable so the request path can stop early. Not thread-safe. */
  interface Job {
    /**
     * Appends ids to {@code out} until it holds at least {@code target} ids or the segment is done.
     *
     * @return true once the whole segment has been appended
     */
    boolean run(IntList out, int target);

    /** Characters of the (normalized) segment not yet encoded. */
    int remainingChars();
  }

  /** Working memory of one caller (one cursor), reused across segments. Not thread-safe. */
  final class Scratch {
    final BpeModel.Scratch bpe = new BpeModel.Scratch();
    /** End offset of each piece of the current segment. */
    final IntList pieceEnds = new IntList(256);
    /** Per piece: the id of a normalized added token, or -1 for a word to encode. */
    final IntList pieceIds = new IntList(256);
  }
}
