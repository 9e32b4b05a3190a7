package dev.kvrouter.examples.sim.fleet;

import dev.kvrouter.extproc.model.MultimodalSpec;
import java.util.Locale;
import java.util.Map;

/**
 * The multimodal model families {@code kvrouter-sim --multimodal} knows: the router's {@code multimodal:} preset of
 * the same name (so workers expand media exactly as the router configured with {@code {preset: <name>}} does), and
 * the family's vocabulary size, which replaces the timing preset's in the engine's out-of-vocabulary check (Gemma 3's
 * ids, its image soft token included, lie beyond every text preset's vocabulary).
 */
public final class MultimodalModels {

  /**
   * Gemma 3's {@code text_config.vocab_size} (config.json of google/gemma-3-4b-it, 12b-it and 27b-it): 262,208, the
   * 262,145 ids of its tokenizer ({@code <image_soft_token>} = 262,144) padded, as vLLM checks prompt ids against
   * it.
   */
  static final int GEMMA3_VOCAB = 262_208;

  private static final Map<String, Integer> VOCAB = Map.of("gemma3", GEMMA3_VOCAB);

  private MultimodalModels() {}

  /**
   * The spec of a preset name, as the router's {@code multimodal: {preset: <name>}}.
   *
   * @throws IllegalArgumentException for a name the router does not know
   */
  public static MultimodalSpec preset(String name) {
    String key = name.trim().toLowerCase(Locale.ROOT);
    if (!MultimodalSpec.PRESETS.contains(key) || !VOCAB.containsKey(key)) {
      throw new IllegalArgumentException("unknown multimodal preset `" + name + "` (known: "
          + String.join(", ", VOCAB.keySet()) + ")");
    }
    return new MultimodalSpec(key, null, null, null, null);
  }

  /** The vocabulary size the engine checks prompt ids against; 0 (not checked) for a spec without a preset. */
  public static int vocabSize(MultimodalSpec spec) {
    return spec.preset() == null ? 0 : VOCAB.getOrDefault(spec.preset(), 0);
  }
}
