package dev.kvrouter.examples.sim.engine;

import java.util.Comparator;
import java.util.List;
import java.util.Objects;

/**
 * One generation request as the engine receives it, after the API layer has tokenized and templated it.
 *
 * @param id unique among the engine's live requests
 * @param promptTokens the prompt's token ids (the engine keeps a copy)
 * @param maxTokens tokens to generate; the simulated model never stops early (vLLM's {@code ignore_eos})
 * @param adapter the LoRA adapter it targets, or {@code null} for the base model
 * @param cacheSalt vLLM's {@code cache_salt}, or {@code null}: requests with different salts never share blocks
 * @param outputSeed decides the generated token ids, so the same request gets the same output on any worker
 * @param media the prompt's media items by position (empty for text): they enter the hashes of the blocks they
 *     overlap, as vLLM's multimodal extra keys
 */
public record RequestSpec(String id, int[] promptTokens, int maxTokens, String adapter, String cacheSalt,
    long outputSeed, List<MediaSpan> media) {

  public RequestSpec {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(promptTokens, "promptTokens");
    if (adapter != null && adapter.isEmpty()) {
      adapter = null;
    }
    if (cacheSalt != null && cacheSalt.isEmpty()) {
      cacheSalt = null;
    }
    if (media == null || media.isEmpty()) {
      media = List.of();
    } else {
      media = media.stream().sorted(Comparator.comparingInt(MediaSpan::offset)).toList();
      if (media.get(media.size() - 1).end() > promptTokens.length) {
        throw new IllegalArgumentException("a media item ends after the prompt");
      }
    }
  }

  /** A text-only request. */
  public RequestSpec(String id, int[] promptTokens, int maxTokens, String adapter, String cacheSalt,
      long outputSeed) {
    this(id, promptTokens, maxTokens, adapter, cacheSalt, outputSeed, List.of());
  }

  public static RequestSpec of(String id, int[] promptTokens, int maxTokens) {
    return new RequestSpec(id, promptTokens, maxTokens, null, null, 0L);
  }
}
