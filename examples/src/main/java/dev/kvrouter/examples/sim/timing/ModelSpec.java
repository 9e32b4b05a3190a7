package dev.kvrouter.examples.sim.timing;

import java.util.Objects;

/**
 * The shape of a dense decoder-only transformer, as in its Hugging Face {@code config.json}: enough to count
 * the FLOPs of a step, the bytes of its weights and the bytes of KV cache per token.
 *
 * @param name the Hugging Face model id
 * @param layers {@code num_hidden_layers}
 * @param hidden {@code hidden_size}
 * @param queryHeads {@code num_attention_heads}
 * @param kvHeads {@code num_key_value_heads} (GQA)
 * @param headDim {@code head_dim}
 * @param intermediate {@code intermediate_size} of the gated MLP
 * @param vocab {@code vocab_size}
 * @param tiedEmbeddings {@code tie_word_embeddings}
 * @param bytesPerWeight 2 for BF16
 * @param bytesPerKvElement 2 for a BF16 KV cache
 * @param maxModelLen the context length vLLM serves by default ({@code max_position_embeddings})
 */
public record ModelSpec(
    String name,
    int layers,
    int hidden,
    int queryHeads,
    int kvHeads,
    int headDim,
    int intermediate,
    int vocab,
    boolean tiedEmbeddings,
    int bytesPerWeight,
    int bytesPerKvElement,
    int maxModelLen) {

  public ModelSpec {
    Objects.requireNonNull(name, "name");
    if (layers <= 0 || hidden <= 0 || queryHeads <= 0 || kvHeads <= 0 || headDim <= 0 || intermediate <= 0
        || vocab <= 0 || bytesPerWeight <= 0 || bytesPerKvElement <= 0 || maxModelLen <= 0) {
      throw new IllegalArgumentException("model dimensions must be positive: " + name);
    }
  }

  /** Parameters of the matrices every token passes through: attention projections and MLP, all layers. */
  public long linearParams() {
    long q = (long) hidden * queryHeads * headDim;
    long kv = 2L * hidden * kvHeads * headDim;
    long o = (long) queryHeads * headDim * hidden;
    long mlp = 3L * hidden * intermediate;
    return layers * (q + kv + o + mlp);
  }

  /** Parameters of the output projection (logits), used once per sampled sequence. */
  public long lmHeadParams() {
    return (long) vocab * hidden;
  }

  /** All parameters, including embeddings (norms are negligible and left out). */
  public long totalParams() {
    return linearParams() + lmHeadParams() * (tiedEmbeddings ? 1 : 2);
  }

  public long weightBytes() {
    return totalParams() * bytesPerWeight;
  }

  /** K and V of one token across all layers: {@code 2 * layers * kvHeads * headDim * bytes}. */
  public long kvBytesPerToken() {
    return 2L * layers * kvHeads * headDim * bytesPerKvElement;
  }
}
