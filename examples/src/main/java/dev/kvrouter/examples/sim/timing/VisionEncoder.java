package dev.kvrouter.examples.sim.timing;

import java.util.Objects;

/**
 * The vision tower of a multimodal model (a ViT such as SigLIP) and its projector into the language model: what
 * encoding one image costs. vLLM runs it in the step that first schedules an image's placeholder tokens, unless
 * the image's positions are already in the KV cache (a prefix hit) or its output is in the encoder cache.
 *
 * @param name the vision model, as in the checkpoint's {@code vision_config}
 * @param layers {@code num_hidden_layers}
 * @param hidden {@code hidden_size}
 * @param intermediate {@code intermediate_size} of its (ungated) MLP
 * @param imageSize {@code image_size}: every image is resized to this square
 * @param patchSize {@code patch_size}: one patch embedding per square of this side
 * @param tokensPerItem embeddings one image yields in the language model ({@code mm_tokens_per_image})
 * @param projectTo the language model's hidden size (the projector's output)
 * @param bytesPerWeight 2 for BF16
 */
public record VisionEncoder(String name, int layers, int hidden, int intermediate, int imageSize,
    int patchSize, int tokensPerItem, int projectTo, int bytesPerWeight) {

  public VisionEncoder {
    Objects.requireNonNull(name, "name");
    if (layers <= 0 || hidden <= 0 || intermediate <= 0 || patchSize <= 0 || imageSize < patchSize
        || tokensPerItem <= 0 || projectTo <= 0 || bytesPerWeight <= 0) {
      throw new IllegalArgumentException("vision encoder dimensions must be positive: " + name);
    }
  }

  /** Patches one image is cut into. */
  public long patchesPerItem() {
    long side = imageSize / patchSize;
    return side * side;
  }

  /** Attention projections (q, k, v, o) and the two MLP matrices of every layer. */
  public long linearParams() {
    return (long) layers * (4L * hidden * hidden + 2L * hidden * intermediate);
  }

  /** The projector into the language model's embedding space. */
  public long projectorParams() {
    return (long) hidden * projectTo;
  }

  /** FLOPs of one image: every patch through every layer, full (bidirectional) attention, then the projector. */
  public double flopsPerItem() {
    double p = patchesPerItem();
    return 2.0 * linearParams() * p + 4.0 * layers * p * p * hidden + 2.0 * projectorParams() * tokensPerItem;
  }

  /** All parameters, with the patch embedding (an RGB patch to a vector) and one position embedding per patch. */
  public long totalParams() {
    long embeddings = 3L * patchSize * patchSize * hidden + patchesPerItem() * hidden;
    return linearParams() + projectorParams() + embeddings;
  }

  public long weightBytes() {
    return totalParams() * bytesPerWeight;
  }
}
