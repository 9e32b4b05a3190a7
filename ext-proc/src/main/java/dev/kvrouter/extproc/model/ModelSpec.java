package dev.kvrouter.extproc.model;

import java.util.List;

/**
 * One entry of the {@code models:} section of kvrouter.yaml: how the router reproduces a model's prompt tokens and
 * which cache namespace its requests belong to. Field names are the YAML keys in snake case
 * (docs/configuration.md, "models").
 *
 * @param name the model name clients send and workers serve (vLLM's served model name)
 * @param tokenizer a directory holding {@code tokenizer.json} (and usually {@code tokenizer_config.json},
 *     sometimes {@code chat_template.jinja}), or the path of a {@code tokenizer.json}; relative paths resolve against
 *     kvrouter.yaml. Null: no tokenizer, requests for the model are routed by load ({@code fallback=no_tokenizer})
 * @param tokenizerConfig explicit {@code tokenizer_config.json}, overriding the one beside the tokenizer
 * @param chatTemplate a Jinja file overriding the model's chat template (as vLLM's {@code --chat-template})
 * @param blockSize KV block size in tokens (vLLM's default 16); workers may override it per worker
 * @param adapters LoRA adapter names served on top of this model; a request naming one uses this model's
 *     tokenizer and template, and the adapter name in its cache identity
 * @param tenancy per-model override of the tenancy rules, or null to follow {@code tenancy:}
 * @param preload load the tokenizer and template at start (default true) rather than on the first request
 * @param multimodal how media parts become prompt tokens for this model (vLLM's multimodal processor), or null:
 *     requests with media are then routed by load ({@code fallback=multimodal})
 * @param messagesInlineSystem where the model's workers put a Messages API request's inline system messages:
 *     {@code auto} (the default: vLLM's probe of the template, which the router runs too), {@code preserve}, {@code fold} (as
 *     vLLM's {@code --anthropic-inline-system}), or {@code merge} (vLLM releases before that probe, which join every
 *     system message into the system prompt)
 */
public record ModelSpec(
    String name,
    String tokenizer,
    String tokenizerConfig,
    String chatTemplate,
    Integer blockSize,
    List<String> adapters,
    Tenancy tenancy,
    Boolean preload,
    MultimodalSpec multimodal,
    String messagesInlineSystem) {

  /** vLLM's default {@code --block-size}. */
  public static final int DEFAULT_BLOCK_SIZE = 16;

  public ModelSpec {
    blockSize = blockSize == null ? DEFAULT_BLOCK_SIZE : blockSize;
    // a null element is reported by ModelSpecs.validate with its index; List.copyOf threw on it
    adapters = adapters == null ? List.of()
        : java.util.Collections.unmodifiableList(new java.util.ArrayList<>(adapters));
    preload = preload == null ? Boolean.TRUE : preload;
    messagesInlineSystem = messagesInlineSystem == null ? "auto" : messagesInlineSystem;
  }

  /** Inline system messages placed as vLLM's probe of the template decides. */
  public ModelSpec(String name, String tokenizer, String tokenizerConfig, String chatTemplate, Integer blockSize,
      List<String> adapters, Tenancy tenancy, Boolean preload, MultimodalSpec multimodal) {
    this(name, tokenizer, tokenizerConfig, chatTemplate, blockSize, adapters, tenancy, preload, multimodal, null);
  }

  /**
   * The configured placement of inline system messages, or null for {@code auto} (the probe's, the default) and for a
   * value {@link ModelSpecs#validate} refuses.
   */
  public InlineSystemMode inlineSystemOverride() {
    if (messagesInlineSystem == null) {
      return null;
    }
    return switch (messagesInlineSystem) {
      case "preserve" -> InlineSystemMode.PRESERVE;
      case "fold" -> InlineSystemMode.FOLD;
      case "merge" -> InlineSystemMode.MERGE;
      default -> null;
    };
  }

  /** A text-only model (no media expansion configured). */
  public ModelSpec(String name, String tokenizer, String tokenizerConfig, String chatTemplate, Integer blockSize,
      List<String> adapters, Tenancy tenancy, Boolean preload) {
    this(name, tokenizer, tokenizerConfig, chatTemplate, blockSize, adapters, tenancy, preload, null);
  }

  /** A model with a tokenizer and defaults for everything else. */
  public static ModelSpec of(String name, String tokenizer) {
    return new ModelSpec(name, tokenizer, null, null, null, null, null, null);
  }

  /**
   * @param shareAcrossTenants true: tenants of this model share cache identity (only a client's own
   *     {@code cache_salt} separates requests); false: each tenant gets its own; null: the global setting
   */
  public record Tenancy(Boolean shareAcrossTenants) {}
}
