package dev.kvrouter.extproc.request;

import java.util.List;
import java.util.Objects;

/**
 * One OpenAI request body, parsed: everything the request path needs to reproduce the engine's prompt tokens
 * (the {@link Prompt}), to identify its cache namespace ({@code model}, {@code cacheSalt}) and to estimate its
 * load ({@link OutputSpec}). Immutable; built by {@link RequestBodyParser}.
 *
 * @param kind completions, chat completions or responses
 * @param model the requested model or LoRA adapter name
 * @param stream whether the client asked for SSE streaming
 * @param includeUsage {@code stream_options.include_usage}, or null when not given
 * @param cacheSalt the client's {@code cache_salt}, or null
 * @param output what the client asked of the output (for load estimation)
 * @param prompt the prompt, exactly as the engine will template and tokenize it
 * @param multimodal media items in the order they appear in the prompt (chat and responses; empty for text)
 * @param unreproducible null when the prompt can be reproduced from the body; otherwise why not, as a fallback
 *     reason (for example {@code prompt_embeds}, {@code unsupported_content_part}): such requests are routed by
 *     load alone
 * @param saltSites where {@code cache_salt} sits in the body, for {@link CacheSaltRewriter}
 * @param bodyBytes size of the body as received
 * @param responses for a Responses API request, its conversation fields; null for the other kinds
 */
public record InferenceRequest(
    Kind kind,
    String model,
    boolean stream,
    Boolean includeUsage,
    String cacheSalt,
    OutputSpec output,
    Prompt prompt,
    List<MultimodalItem> multimodal,
    String unreproducible,
    CacheSaltSites saltSites,
    int bodyBytes,
    ResponsesFields responses) {

  /**
   * What a Responses API request says about its place in a stored conversation.
   *
   * @param previousResponseId {@code previous_response_id}, or null
   * @param requestIdGiven whether the client chose the {@code request_id} (the response's id) itself
   */
  public record ResponsesFields(String previousResponseId, boolean requestIdGiven) {}

  /** As a record prints itself, but without the client's salt: vLLM asks that it be kept from third parties. */
  @Override
  public String toString() {
    return "InferenceRequest[kind=" + kind + ", model=" + model + ", stream=" + stream + ", includeUsage="
        + includeUsage + ", cacheSalt=" + (cacheSalt == null ? null : "<redacted>") + ", output=" + output
        + ", prompt=" + prompt + ", multimodal=" + multimodal + ", unreproducible=" + unreproducible + ", saltSites="
        + saltSites + ", bodyBytes=" + bodyBytes + ", responses=" + responses + "]";
  }

  public enum Kind {
    COMPLETIONS,
    CHAT,
    /**
     * OpenAI's Responses API ({@code POST /v1/responses}), which vLLM serves by turning {@code instructions},
     * {@code input} and {@code tools} into a chat prompt: its {@link #prompt()} is that {@link ChatPrompt}
     * ({@code ResponsesInput}), except for the reasons {@link #RESPONSES_STORED}, {@link #RESPONSES_PREVIOUS_INPUT}
     * and {@link #RESPONSES_ITEM}.
     */
    RESPONSES,
    /**
     * Anthropic's Messages API ({@code POST /v1/messages}), which vLLM serves by turning {@code system},
     * {@code messages} and {@code tools} into a chat completion request: its {@link #prompt()} is that
     * {@link ChatPrompt} ({@code MessagesInput}); a request with images is not reproduced ({@link #MESSAGES_MEDIA}).
     */
    MESSAGES
  }

  /**
   * A Responses request continuing a stored conversation ({@code previous_response_id}, or a client-held
   * {@code previous_response}): its earlier turns live on the worker, so its prompt is not known here.
   */
  public static final String RESPONSES_STORED = "responses_stored_conversation";

  /** A Responses request with {@code previous_input_messages} (Harmony-format history vLLM keeps out of chat). */
  public static final String RESPONSES_PREVIOUS_INPUT = "responses_previous_input_messages";

  /**
   * A Responses input item vLLM does not translate into a chat message (built-in tool calls, MCP items,
   * {@code item_reference}, ...; it hands the raw item to the template), or one it fails on (an output message
   * whose first part is a refusal).
   */
  public static final String RESPONSES_ITEM = "responses_input_item";

  /** A Messages API request with an image: this path does not hash media the way vLLM's processor would. */
  public static final String MESSAGES_MEDIA = "messages_media";

  public InferenceRequest {
    Objects.requireNonNull(kind, "kind");
    Objects.requireNonNull(model, "model");
    Objects.requireNonNull(output, "output");
    Objects.requireNonNull(prompt, "prompt");
    multimodal = multimodal == null ? List.of() : List.copyOf(multimodal);
    saltSites = saltSites == null ? CacheSaltSites.UNKNOWN : saltSites;
  }

  /**
   * A request known only by its routing fields, without a prompt (the skeleton's shape; routing tests and
   * simulators use it). Its prompt is empty and it has no salt sites, so it cannot be rewritten.
   *
   * @param maxTokens the output cap, or -1 when unbounded
   */
  public InferenceRequest(Kind kind, String model, boolean stream, String cacheSalt, int maxTokens) {
    this(kind, model, stream, null, cacheSalt, new OutputSpec(maxTokens < 0 ? -1 : maxTokens, 0, false, 1, 0),
        kind == Kind.CHAT
            ? new ChatPrompt(List.of(), null, null, null, true, false, null, null, null, false, null, null, null)
            : new CompletionPrompt(List.of(), true, null, null),
        List.of(), null, CacheSaltSites.UNKNOWN, 0, null);
  }

  /** {@code max_completion_tokens} / {@code max_tokens} as the engine applies it, or -1 for "up to the context". */
  public int maxTokens() {
    return output.maxTokens();
  }

  /** The chat prompt; throws for a completions request. */
  public ChatPrompt chat() {
    if (prompt instanceof ChatPrompt c) {
      return c;
    }
    throw new IllegalStateException("not a chat request");
  }

  /** The completions prompt; throws for a chat request. */
  public CompletionPrompt completion() {
    if (prompt instanceof CompletionPrompt c) {
      return c;
    }
    throw new IllegalStateException("not a completions request");
  }
}
