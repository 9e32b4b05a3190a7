package dev.kvrouter.examples.sim.engine;

import dev.kvrouter.index.block.BlockHasher;
import java.util.List;
import java.util.Objects;

/**
 * Where one media item sits in a request's prompt, as vLLM's {@code mm_position} with its {@code identifier}: the
 * prompt tokens {@code [offset, offset + length)} hold the item's placeholder sequence. Every block overlapping
 * that range carries {@code [identifier, offset - block_start]} in its hash's extra keys.
 *
 * @param identifier the client's {@code uuid}, or the engine's own hash of the media content
 * @param offset first prompt token of the item
 * @param length tokens of the item's sequence (vLLM's position length, which a token merge may not shorten)
 */
public record MediaSpan(String identifier, int offset, int length) {

  public MediaSpan {
    Objects.requireNonNull(identifier, "identifier");
    if (offset < 0 || length <= 0) {
      throw new IllegalArgumentException("media span needs offset >= 0 and length > 0, was " + offset + "/" + length);
    }
  }

  public int end() {
    return offset + length;
  }

  /**
   * The multimodal extra keys of the block {@code [start, start + blockSize)} folded the way the router folds them
   * ({@link BlockHasher#multimodalExtra}): {@code [identifier, offset - start]} of every item of {@code media}
   * (sorted by offset) that overlaps the block, in position order. The one definition the engine's block hashes and
   * the workload's ideal reuse share.
   */
  public static long blockExtra(List<MediaSpan> media, int start, int blockSize) {
    int end = start + blockSize;
    CharSequence[] ids = new CharSequence[media.size()];
    int[] offsets = new int[media.size()];
    int k = 0;
    for (MediaSpan m : media) {
      if (m.offset >= end) {
        break;
      }
      if (m.end() > start) {
        ids[k] = m.identifier;
        offsets[k] = m.offset - start;
        k++;
      }
    }
    return BlockHasher.multimodalExtra(ids, offsets, 0, k);
  }
}
