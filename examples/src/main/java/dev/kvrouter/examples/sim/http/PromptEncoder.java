package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvrouter.examples.sim.engine.MediaSpan;
import dev.kvrouter.examples.workload.ChatAnswers;
import dev.kvrouter.examples.workload.TokenSpace;
import dev.kvrouter.examples.workload.ToolCallAnswer;
import dev.kvrouter.extproc.request.InferenceRequest;
import java.util.List;

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

  /**
   * As {@link #encodeChat}, with the prompt's media items: their placeholders expanded into the model's token
   * sequence and their positions, as vLLM's multimodal processor leaves them.
   *
   * @throws BadInput if the request holds media this model cannot take (vLLM answers such requests with 400)
   * @throws UnsupportedOperationException if this encoder cannot render chat templates
   */
  default ChatTokens encodeChatPrompt(JsonNode request) {
    return new ChatTokens(encodeChat(request), List.of());
  }

  /**
   * The chat prompt of a {@code /v1/responses} request, as vLLM's non-Harmony path renders it: instructions, input
   * items and tools turned into chat messages, then templated and tokenized like {@link #encodeChatPrompt}.
   *
   * @throws Unsupported if this encoder cannot render chat templates, or the request's prompt cannot be known from
   *     its body (a stored conversation, Harmony history, input items vLLM hands to the template raw)
   * @throws BadInput as {@link #encodeChatPrompt}
   */
  default ChatTokens encodeResponsesPrompt(JsonNode request) {
    throw new Unsupported("this worker has no tokenizer or chat template: the Responses API needs one");
  }

  /**
   * The chat prompt of a {@code /v1/messages} (Anthropic Messages API) request, as vLLM's
   * {@code to_chat_completion_request} converts it, then templated and tokenized like {@link #encodeChatPrompt}.
   *
   * @throws Unsupported if this encoder cannot render chat templates, or the prompt cannot be known from the body
   *     (images, which the router's conversion does not reproduce)
   * @throws BadInput for a body vLLM refuses
   */
  default ChatTokens encodeMessagesPrompt(JsonNode request) {
    throw new Unsupported("this worker has no tokenizer or chat template: the Messages API needs one");
  }

  /**
   * The model's side of scripted chat answers: the answer text's tokens, then the template's end-of-turn token.
   *
   * @throws Unsupported when this encoder renders no chat
   */
  default ChatAnswers chatAnswers(TokenSpace space) {
    throw new Unsupported("this encoder renders no chat template");
  }

  /**
   * What the model generates for {@code answer} to {@code request}, a {@code /v1/messages} ({@code kind}
   * {@code MESSAGES}) or {@code /v1/chat/completions} ({@code CHAT}) body ({@link ToolCallScript}).
   *
   * @throws Unsupported when this encoder renders no chat template, or the template's rendering of the answer does
   *     not extend the prompt's
   */
  default ToolCallScript toolCallScript(InferenceRequest.Kind kind, JsonNode request, ToolCallAnswer answer) {
    throw new Unsupported("this encoder renders no chat template");
  }

  /**
   * As {@link #toolCallScript(InferenceRequest.Kind, JsonNode, ToolCallAnswer)}, given the request's prompt as this
   * encoder rendered it ({@link ChatTokens#text}, null: not at hand), which spares rendering it again.
   */
  default ToolCallScript toolCallScript(InferenceRequest.Kind kind, JsonNode request, ToolCallAnswer answer,
      String promptText) {
    return toolCallScript(kind, request, answer);
  }

  /** Text of one generated token, for response bodies. */
  String tokenText(int tokenId);

  /** Token ids the simulated model draws its output from (decodable to readable text). */
  int[] outputVocabulary();

  /** An encoder for token-id-only workers: every text prompt is refused. */
  static PromptEncoder tokenIdsOnly() {
    return TokenIdsOnly.INSTANCE;
  }

  /**
   * A chat prompt as the engine prefills it.
   *
   * @param tokens the prompt's token ids
   * @param media its media items by position (empty for text)
   * @param text the chat template's rendering the tokens were encoded from, or null when not kept
   */
  record ChatTokens(int[] tokens, List<MediaSpan> media, String text) {
    public ChatTokens {
      media = media == null ? List.of() : List.copyOf(media);
    }

    public ChatTokens(int[] tokens, List<MediaSpan> media) {
      this(tokens, media, null);
    }
  }

  /** Thrown for a request the engine refuses as invalid (an unsupported modality, mismatched media); a 400. */
  final class BadInput extends IllegalArgumentException {
    public BadInput(String message) {
      super(message);
    }
  }

  /** Thrown when a prompt form cannot be handled; becomes a 400 (or 501 for chat templates). */
  final class Unsupported extends UnsupportedOperationException {
    public Unsupported(String message) {
      super(message);
    }
  }
}
