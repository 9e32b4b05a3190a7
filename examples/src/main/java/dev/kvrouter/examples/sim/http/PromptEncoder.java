package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * Turns text prompts into token ids exactly as the router does, so that the worker's prefix cache and the
 * router's block identities agree. Token-id prompts need no encoder.
 *
 * <p>Implementations are thread-safe (HTTP handler threads call them concurrently).
 */
public interface PromptEncoder {

  /**
   * Token ids of a {@code /v1/completions} text prompt. vLLM tokenizes completion prompts with
   * {@code add_special_tokens=True} (so Llama's BOS is added) and never truncates.
   */
  int[] encodeCompletion(String prompt);

  /**
   * Token ids of a {@code /v1/chat/completions} request: the chat template rendered with the generation prompt,
   * then tokenized without adding special tokens (the template writes them).
   *
   * @throws UnsupportedOperationException if this encoder cannot render chat templates
   */
  int[] encodeChat(JsonNode request);

  /** Text of one generated token, for response bodies. */
  String tokenText(int tokenId);

  /** Token ids the simulated model draws its output from (decodable to readable text). */
  int[] outputVocabulary();

  /** An encoder for token-id-only workers: every text prompt is refused. */
  static PromptEncoder tokenIdsOnly() {
    return TokenIdsOnly.INSTANCE;
  }

  /** Thrown when a prompt form cannot be handled; becomes a 400 (or 501 for chat templates). */
  final class Unsupported extends UnsupportedOperationException {
    public Unsupported(String message) {
      super(message);
    }
  }
}
