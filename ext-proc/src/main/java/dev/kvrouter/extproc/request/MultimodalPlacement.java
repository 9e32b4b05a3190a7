package dev.kvrouter.extproc.request;

import java.util.Objects;

/**
 * Where a {@link MultimodalItem}'s placeholder tokens ended up in the tokenized prompt: {@code [offset,
 * offset + length)}, found by the tokenization pipeline (vLLM's {@code mm_position}). The length depends on the
 * model's processor (for most vision models on the image's size), so it is the pipeline's to supply.
 */
public record MultimodalPlacement(MultimodalItem item, int offset, int length) {

  public MultimodalPlacement {
    Objects.requireNonNull(item, "item");
    if (offset < 0 || length <= 0) {
      throw new IllegalArgumentException("placement needs offset >= 0 and length > 0, was " + offset + "/" + length);
    }
  }

  public int end() {
    return offset + length;
  }
}
