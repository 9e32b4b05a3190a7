package dev.kvrouter.extproc.tokenize;

import java.util.List;

/**
 * The supported pre-tokenizer pipeline: a sequence of {@code Split} steps (each refining the pieces of the
 * previous one), optionally followed by {@code ByteLevel} without its own regex (which only maps bytes and
 * is applied by the model). Produces piece boundaries, never strings. Immutable and thread-safe.
 */
final class PreTokenizer {

  /** How a Split step treats the matched delimiters (tokenizers' {@code SplitDelimiterBehavior}). */
  enum Behavior {
    ISOLATED,
    MERGED_WITH_PREVIOUS
  }

  /** One Split step. */
  record Step(SplitPattern pattern, Behavior behavior) {}

  private final Step[] steps;
  private final boolean byteLevel;

  PreTokenizer(List<Step> steps, boolean byteLevel) {
    this.steps = steps.toArray(new Step[0]);
    this.byteLevel = byteLevel;
  }

  boolean byteLevel() {
    return byteLevel;
  }

  /** Appends the end offset of every piece of {@code s[start, end)} to {@code ends}, in order. */
  void split(CharSequence s, int start, int end, IntList ends) {
    if (start < end) {
      split(0, s, start, end, ends);
    }
  }

  private void split(int level, CharSequence s, int start, int end, IntList ends) {
    if (level == steps.length) {
      ends.add(end);
      return;
    }
    Step step = steps[level];
    SplitPattern pattern = step.pattern();
    int pos = start;
    int pieceStart = start;
    while (pos < end) {
      int m = pattern.matchAt(s, pos, end);
      if (m <= pos) {
        pos += SplitPattern.len(SplitPattern.cpAt(s, pos, end));
        continue;
      }
      if (step.behavior() == Behavior.ISOLATED) {
        if (pieceStart < pos) {
          split(level + 1, s, pieceStart, pos, ends);
        }
        split(level + 1, s, pos, m, ends);
      } else {
        // MergedWithPrevious: the delimiter joins the text before it, or stands alone when it directly
        // follows the start or another delimiter (as tokenizers folds its match list).
        split(level + 1, s, pieceStart, m, ends);
      }
      pos = m;
      pieceStart = m;
    }
    if (pieceStart < end) {
      split(level + 1, s, pieceStart, end, ends);
    }
  }
}
