package dev.kvrouter.extproc.request;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Per-block multimodal keys, the way vLLM derives them ({@code generate_block_hash_extra_keys}): for block
 * {@code [start, start + blockSize)}, every item whose placeholder range overlaps it contributes
 * {@code (identifier, offset - start)} (negative when the item began in an earlier block), in placeholder order.
 * The contributions are folded into the block's {@code extra} value of {@code BlockHasher.blockHash} by a
 * {@link Folder}, which the index module supplies so that the event path, which reads the same pairs from
 * {@code BlockStored.extra_keys}, folds them identically.
 */
public final class MultimodalBlockKeys {

  /** Folds one {@code (identifier, offset in block)} pair into a block's extra value (0 = none yet). */
  @FunctionalInterface
  public interface Folder {
    long fold(long extra, String identifier, int offsetInBlock);
  }

  private MultimodalBlockKeys() {}

  /**
   * The extra value of each full block of a {@code tokenCount}-token prompt; 0 for blocks no item overlaps.
   */
  public static long[] extras(List<MultimodalPlacement> placements, int tokenCount, int blockSize, Folder folder) {
    if (blockSize <= 0) {
      throw new IllegalArgumentException("blockSize must be positive, was " + blockSize);
    }
    long[] out = new long[tokenCount / blockSize];
    if (placements.isEmpty() || out.length == 0) {
      return out;
    }
    List<MultimodalPlacement> sorted = new ArrayList<>(placements);
    sorted.sort(Comparator.comparingInt(MultimodalPlacement::offset));
    int first = 0; // items ending before the current block never overlap a later one
    for (int b = 0; b < out.length; b++) {
      int start = b * blockSize;
      int end = start + blockSize;
      while (first < sorted.size() && sorted.get(first).end() <= start) {
        first++;
      }
      long extra = 0;
      for (int i = first; i < sorted.size(); i++) {
        MultimodalPlacement p = sorted.get(i);
        if (p.offset() >= end) {
          break;
        }
        if (p.end() > start) {
          extra = folder.fold(extra, p.item().identifier(), p.offset() - start);
        }
      }
      out[b] = extra;
    }
    return out;
  }
}
