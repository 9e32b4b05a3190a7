package dev.kvrouter.examples.workload;

import java.util.Objects;

/**
 * Where one media item sits in a prompt's token ids and the identity the engine keys it by: the blocks overlapping
 * {@code [offset, offset + length)} carry {@code [identifier, offset - block_start]} in their hashes (vLLM's
 * multimodal extra keys), so they are equal only for the same identity at the same offset.
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
}
