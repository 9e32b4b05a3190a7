package dev.kvrouter.extproc.request;

import dev.kvrouter.index.block.BlockHasher;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Per-block multimodal keys, the way vLLM derives them ({@code generate_block_hash_extra_keys}): for block
 * {@code [start, start + blockSize)}, every item whose placeholder range overlaps it contributes
 * {@code (identifier, offset - start)} (negative when the item began in an earlier block), in placeholder order.
 * Each block's pairs become its {@code extra} value through {@link BlockHasher#multimodalExtra}, the one helper
 * the event path also applies to {@code BlockStored.extra_keys}, so both paths name a multimodal block alike.
 */
public final class MultimodalBlockKeys {

  private MultimodalBlockKeys() {}

  /**
   * The {@code extra} value of each full block of a {@code tokenCount}-token prompt, for
   * {@link BlockHasher#blockHash}; 0 for blocks no item overlaps.
   */
  public static long[] extras(List<MultimodalPlacement> placements, int tokenCount, int blockSize) {
    if (blockSize <= 0) {
      throw new IllegalArgumentException("blockSize must be positive, was " + blockSize);
    }
    long[] out = new long[tokenCount / blockSize];
    if (placements.isEmpty() || out.length == 0) {
      return out;
    }
    List<MultimodalPlacement> sorted = new ArrayList<>(placements);
    sorted.sort(Comparator.comparingInt(MultimodalPlacement::offset));
    CharSequence[] ids = new CharSequence[sorted.size()];
    int[] offsets = new int[sorted.size()];
    int first = 0; // items ending before the current block never overlap a later one
    for (int b = 0; b < out.length; b++) {
      int start = b * blockSize;
      int end = start + blockSize;
      while (first < sorted.size() && sorted.get(first).end() <= start) {
        first++;
      }
      int n = 0;
      for (int i = first; i < sorted.size(); i++) {
        MultimodalPlacement p = sorted.get(i);
        if (p.offset() >= end) {
          break;
        }
        if (p.end() > start) {
          ids[n] = p.item().identifier();
          offsets[n] = p.offset() - start;
          n++;
        }
      }
      out[b] = BlockHasher.multimodalExtra(ids, offsets, 0, n);
    }
    return out;
  }
}
