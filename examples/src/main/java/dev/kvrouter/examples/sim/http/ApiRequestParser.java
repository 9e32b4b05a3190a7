package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.core.JsonFactory;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import com.fasterxml.jackson.databind.node.BooleanNode;
import com.fasterxml.jackson.databind.node.DoubleNode;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.node.TextNode;
import dev.kvrouter.examples.workload.ToolCallAnswer;
import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import dev.kvrouter.extproc.request.OpenAiError;
import java.util.HexFormat;
import java.util.concurrent.ThreadLocalRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * Parses and validates {@code /v1/completions}, {@code /v1/chat/completions}, {@code /v1/responses} and
 * {@code /v1/messages} bodies the way vLLM's OpenAI server does, as far as the simulated engine is concerned.
 * Thread-safe.
 */
final class ApiRequestParser {

  /** vLLM's default {@code max_tokens} for completions. */
  static final int DEFAULT_COMPLETION_MAX_TOKENS = 16;
  /**
   * Chat requests without a length: vLLM would generate until EOS or the context ends; the simulated model
   * has no EOS, so it answers this many tokens instead.
   */
  static final int DEFAULT_CHAT_MAX_TOKENS = 256;

  private static final ObjectMapper JSON = new ObjectMapper(JsonFactory.builder()
      .streamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(64).build()).build());

  /** The fields of vLLM's {@code AnthropicCountTokensRequest}; it ignores any other. */
  private static final List<String> COUNT_TOKENS_FIELDS = List.of("model", "messages", "system", "tool_choice",
      "tools", "chat_template_kwargs");

  private final EngineConfig config;
  private final PromptEncoder encoder;
  /** Whether a Messages request's scripted tool-call answer is read ({@link ToolCallAnswer}); else it is ignored. */
  private final boolean toolCallAnswers;

  /**
   * @param toolCallAnswers whether the worker generates the tool-call answers Messages requests script in
   *     {@code vllm_xargs} (a scripted worker does; any other ignores them, as vLLM does)
   */
  ApiRequestParser(EngineConfig config, PromptEncoder encoder, boolean toolCallAnswers) {
    this.config = config;
    this.encoder = encoder;
    this.toolCallAnswers = toolCallAnswers;
  }

  ApiRequest parse(Kind kind, byte[] body) throws ApiException {
    boolean chat = kind == Kind.CHAT;
    JsonNode root = object(body);
    String model = model(root);
    String adapter = model.equals(config.model()) ? null : model;
    boolean stream = bool(root, "stream", false);
    if (kind == Kind.RESPONSES) {
      return responses(root, model, adapter, stream);
    }
    if (kind == Kind.MESSAGES) {
      return messages(root, model, adapter, stream);
    }
    JsonNode so = root.get("stream_options");
    boolean includeUsage = false;
    if (so != null && !so.isNull()) {
      if (!stream) {
        throw ApiException.badRequest("Stream options can only be defined when `stream=True`.", "stream_options");
      }
      if (!so.isObject()) {
        throw ApiException.badRequest("`stream_options` must be an object", "stream_options");
      }
      includeUsage = bool(so, "include_usage", false);
    }
    JsonNode n = root.get("n");
    if (n != null && !n.isNull() && !(n.canConvertToInt() && n.asInt() == 1)) {
      throw ApiException.badRequest("the simulated worker supports only n=1", "n");
    }
    if (bool(root, "echo", false)) {
      throw ApiException.badRequest("the simulated worker does not support `echo`", "echo");
    }
    JsonNode v = root.get("max_completion_tokens");
    String param = "max_completion_tokens";
    if (v == null || v.isNull()) {
      v = root.get("max_tokens");
      param = "max_tokens";
    }
    int maxTokens = maxTokens(v, param, chat ? DEFAULT_CHAT_MAX_TOKENS : DEFAULT_COMPLETION_MAX_TOKENS);
    String salt = cacheSalt(root);
    JsonNode sd = seed(root);
    long seed = sd == null ? 0 : sd.asLong();
    boolean ignoreEos = bool(root, "ignore_eos", false);
    if (chat) {
      PromptEncoder.ChatTokens prompt = chatPrompt(root);
      return new ApiRequest(kind, model, adapter, List.of(prompt.tokens()), maxTokens, stream, includeUsage, salt,
          seed, sd != null, ignoreEos, answerWords(root), prompt.media(), null,
          toolCallScript(Kind.CHAT, root, prompt));
    }
    return new ApiRequest(kind, model, adapter, completionPrompts(root.get("prompt")), maxTokens, stream,
        includeUsage, salt, seed, sd != null, ignoreEos, 0, List.of(), null, null);
  }

  /**
   * The prompt length of a {@code /v1/messages/count_tokens} request, as vLLM's
   * {@code AnthropicServingMessages.count_tokens} computes it: the body converted and rendered as a Messages request
   * is, then tokenized, nothing generated. vLLM's count request declares only {@link #COUNT_TOKENS_FIELDS}, so the
   * rest ({@code max_tokens}, {@code thinking}, {@code output_config}, ...) is dropped before the conversion: the
   * count equals the {@code /v1/messages} prompt of the same body unless those change its rendering.
   */
  int countMessagesTokens(byte[] body) throws ApiException {
    JsonNode root = object(body);
    model(root);
    ObjectNode declared = JSON.createObjectNode();
    for (String f : COUNT_TOKENS_FIELDS) {
      if (root.has(f)) {
        declared.set(f, root.get(f));
      }
    }
    // vLLM builds the count's chat request without max_tokens; the Messages conversion this reuses refuses a body
    // without one, as vLLM's Messages model does. It never reaches the rendering, so any valid value counts the same
    declared.put("max_tokens", 1);
    return encoded(encoder::encodeMessagesPrompt, declared, "messages").tokens().length;
  }

  private static JsonNode object(byte[] body) throws ApiException {
    JsonNode root;
    try {
      root = JSON.readTree(body);
    } catch (JsonProcessingException e) {
      // Jackson's message can quote the input; say only where it broke.
      throw ApiException.badRequest("request body is not valid JSON (line " + e.getLocation().getLineNr()
          + ", column " + e.getLocation().getColumnNr() + ")", null);
    } catch (java.io.IOException e) {
      throw ApiException.badRequest("request body could not be read", null);
    }
    if (root == null || !root.isObject()) {
      throw ApiException.badRequest("request body must be a JSON object", null);
    }
    return root;
  }

  /** The served model or one of its adapters that {@code model} names; 404 for any other, as vLLM answers. */
  private String model(JsonNode root) throws ApiException {
    JsonNode m = root.get("model");
    if (m == null || !m.isTextual() || m.asText().isEmpty()) {
      throw ApiException.badRequest("you must provide a `model` string", "model");
    }
    String model = m.asText();
    if (!model.equals(config.model()) && !config.adapters().contains(model)) {
      throw new ApiException(new OpenAiError(404, "NotFoundError", "model_not_found",
          "The model `" + model + "` does not exist.", "model"));
    }
    return model;
  }

  /**
   * A {@code /v1/responses} request as vLLM's non-Harmony path takes it ({@code OpenAIServingResponses
   * ._create_responses}). The worker runs with vLLM's default of no response store
   * ({@code VLLM_ENABLE_RESPONSES_API_STORE} unset), so every {@code previous_response_id} is unknown: 404, as vLLM
   * answers it; background mode needs the store: 400.
   */
  private ApiRequest responses(JsonNode root, String model, String adapter, boolean stream) throws ApiException {
    JsonNode rid = root.get("request_id");
    if (rid != null && !rid.isTextual()) {
      throw ApiException.badRequest("`request_id` must be a string", "request_id");
    }
    String id = rid != null ? rid.asText() : "resp_" + HexFormat.of().toHexDigits(
        ThreadLocalRandom.current().nextLong()) + HexFormat.of().toHexDigits(ThreadLocalRandom.current().nextLong());
    JsonNode prev = root.get("previous_response_id");
    if (prev != null && !prev.isNull()) {
      if (!prev.isTextual()) {
        throw ApiException.badRequest("`previous_response_id` must be a string", "previous_response_id");
      }
      throw new ApiException(new OpenAiError(404, "invalid_request_error", "not_found",
          "Response with id '" + prev.asText() + "' not found.", "response_id"));
    }
    if (bool(root, "background", false)) {
      throw ApiException.badRequest("background mode needs a response store, which this worker does not keep",
          "background");
    }
    int maxTokens = maxTokens(root.get("max_output_tokens"), "max_output_tokens", DEFAULT_CHAT_MAX_TOKENS);
    String salt = cacheSalt(root);
    JsonNode sd = seed(root);
    PromptEncoder.ChatTokens prompt = encoded(encoder::encodeResponsesPrompt, root, "input");
    ObjectNode r = JSON.createObjectNode();
    r.put("id", id);
    r.put("created_at", 0L);
    r.putNull("incomplete_details");
    echo(r, root, "instructions", null);
    echo(r, root, "metadata", null);
    r.put("model", model);
    r.put("object", "response");
    r.putArray("output");
    echo(r, root, "parallel_tool_calls", BooleanNode.TRUE);
    echo(r, root, "temperature", DoubleNode.valueOf(1.0));
    echo(r, root, "tool_choice", TextNode.valueOf("auto"));
    echo(r, root, "tools", JSON.createArrayNode());
    echo(r, root, "top_p", DoubleNode.valueOf(1.0));
    r.put("background", false);
    r.put("max_output_tokens", maxTokens);
    echo(r, root, "max_tool_calls", null);
    r.putNull("previous_response_id");
    r.putNull("prompt");
    echo(r, root, "reasoning", null);
    echo(r, root, "service_tier", TextNode.valueOf("auto"));
    r.put("status", "in_progress");
    echo(r, root, "text", null);
    r.putNull("top_logprobs");
    echo(r, root, "truncation", TextNode.valueOf("disabled"));
    r.putNull("usage");
    echo(r, root, "user", null);
    return new ApiRequest(Kind.RESPONSES, model, adapter, List.of(prompt.tokens()), maxTokens, stream, false, salt,
        sd == null ? 0 : sd.asLong(), sd != null, bool(root, "ignore_eos", false), answerWords(root), prompt.media(),
        r, null);
  }

  /**
   * A {@code /v1/messages} request as vLLM's {@code AnthropicServingMessages} takes it: converted into a chat request
   * by the router's own conversion, which also refuses what vLLM's Anthropic request model refuses (a missing or
   * non-positive {@code max_tokens}, a bad {@code thinking}, ...: 400). The Anthropic model has no {@code seed} (vLLM drops undeclared fields), so none is read;
   * {@code cache_salt} is passed on as vLLM's conversion does.
   */
  private ApiRequest messages(JsonNode root, String model, String adapter, boolean stream) throws ApiException {
    int maxTokens = maxTokens(root.get("max_tokens"), "max_tokens", DEFAULT_CHAT_MAX_TOKENS);
    String salt = cacheSalt(root);
    PromptEncoder.ChatTokens prompt = encoded(encoder::encodeMessagesPrompt, root, "messages");
    return new ApiRequest(Kind.MESSAGES, model, adapter, List.of(prompt.tokens()), maxTokens, stream, false, salt,
        0, false, false, 0, prompt.media(), null, toolCallScript(Kind.MESSAGES, root, prompt));
  }

  /**
   * The tool-call answer {@code vllm_xargs} scripts, as the model generates it after {@code prompt} (whose rendering
   * is reused, not redone), or null when it scripts none or the worker does not read scripts.
   */
  private ToolCallScript toolCallScript(Kind kind, JsonNode root, PromptEncoder.ChatTokens prompt)
      throws ApiException {
    if (!toolCallAnswers) {
      return null;
    }
    ToolCallAnswer answer;
    try {
      answer = ToolCallAnswer.fromXargs(root.get("vllm_xargs"));
    } catch (IllegalArgumentException e) {
      throw ApiException.badRequest(e.getMessage(), "vllm_xargs");
    }
    return answer == null ? null : encoded(r -> encoder.toolCallScript(kind, r, answer, prompt.text()), root,
        "vllm_xargs");
  }

  /** {@code field} of the request into the response, or {@code dflt} (JSON null when null) when not given. */
  private static void echo(ObjectNode r, JsonNode root, String field, JsonNode dflt) {
    JsonNode v = root.get(field);
    r.set(field, v != null && !v.isNull() ? v : dflt == null ? NullNode.getInstance() : dflt);
  }

  private static String cacheSalt(JsonNode root) throws ApiException {
    JsonNode cs = root.get("cache_salt");
    if (cs == null || cs.isNull()) {
      return null;
    }
    if (!cs.isTextual() || cs.asText().isEmpty()) {
      throw ApiException.badRequest("`cache_salt` must be a non-empty string", "cache_salt");
    }
    return cs.asText();
  }

  /** The {@code seed}, or null when not given. */
  private static JsonNode seed(JsonNode root) throws ApiException {
    JsonNode sd = root.get("seed");
    if (sd == null || sd.isNull()) {
      return null;
    }
    if (!sd.canConvertToLong()) {
      throw ApiException.badRequest("`seed` must be an integer", "seed");
    }
    return sd;
  }

  /**
   * A scripted answer's length in words from {@code vllm_xargs.answer_words} (vLLM's field for custom extensions,
   * which it accepts and hands to the sampler untouched), or 0 when not given: then {@code max_tokens} names it.
   * It lets a client give the answer room to end before {@code max_tokens} cuts it.
   */
  private static int answerWords(JsonNode root) throws ApiException {
    JsonNode x = root.get("vllm_xargs");
    if (x == null || x.isNull()) {
      return 0;
    }
    if (!x.isObject()) {
      throw ApiException.badRequest("`vllm_xargs` must be an object", "vllm_xargs");
    }
    JsonNode w = x.get("answer_words");
    return w == null || w.isNull() ? 0 : maxTokens(w, "vllm_xargs.answer_words", 0);
  }

  private static int maxTokens(JsonNode v, String param, int dflt) throws ApiException {
    if (v == null || v.isNull()) {
      return dflt;
    }
    if (!v.canConvertToInt() || !v.isIntegralNumber() || v.asInt() < 1) {
      throw ApiException.badRequest("`" + param + "` must be a positive integer", param);
    }
    return v.asInt();
  }

  private PromptEncoder.ChatTokens chatPrompt(JsonNode root) throws ApiException {
    JsonNode messages = root.get("messages");
    if (messages == null || !messages.isArray() || messages.isEmpty()) {
      throw ApiException.badRequest("`messages` must be a non-empty list", "messages");
    }
    return encoded(encoder::encodeChatPrompt, root, "messages");
  }

  /** A chat-like prompt: the encoder's refusals are vLLM's 400s, what it cannot reproduce a 501 naming why. */
  private static <T> T encoded(Function<JsonNode, T> encode, JsonNode root, String param) throws ApiException {
    try {
      return encode.apply(root);
    } catch (PromptEncoder.BadInput e) {
      throw ApiException.badRequest(e.getMessage(), param);
    } catch (PromptEncoder.Unsupported e) {
      throw new ApiException(new OpenAiError(501, "NotImplementedError", "not_implemented", e.getMessage(),
          param));
    }
  }

  private List<int[]> completionPrompts(JsonNode prompt) throws ApiException {
    if (prompt == null || prompt.isNull()) {
      throw ApiException.badRequest("you must provide a `prompt`", "prompt");
    }
    List<int[]> out = new ArrayList<>();
    if (prompt.isTextual()) {
      out.add(encodeText(prompt.asText()));
      return out;
    }
    if (!prompt.isArray() || prompt.isEmpty()) {
      throw ApiException.badRequest("`prompt` must be a string, a list of strings, a list of token ids or a list "
          + "of lists of token ids", "prompt");
    }
    JsonNode first = prompt.get(0);
    if (first.isIntegralNumber()) {
      out.add(tokenIds(prompt));
    } else if (first.isTextual()) {
      for (JsonNode p : prompt) {
        if (!p.isTextual()) {
          throw ApiException.badRequest("`prompt` mixes strings and other values", "prompt");
        }
        out.add(encodeText(p.asText()));
      }
    } else if (first.isArray()) {
      for (JsonNode p : prompt) {
        if (!p.isArray() || p.isEmpty()) {
          throw ApiException.badRequest("every prompt in a batch of token-id prompts must be a non-empty list",
              "prompt");
        }
        out.add(tokenIds(p));
      }
    } else {
      throw ApiException.badRequest("`prompt` holds an unsupported value", "prompt");
    }
    return out;
  }

  private int[] encodeText(String text) throws ApiException {
    if (text.isEmpty()) {
      throw ApiException.badRequest("the prompt must not be empty", "prompt");
    }
    try {
      return encoder.encodeCompletion(text);
    } catch (PromptEncoder.Unsupported e) {
      throw ApiException.badRequest(e.getMessage(), "prompt");
    }
  }

  private static int[] tokenIds(JsonNode list) throws ApiException {
    int[] ids = new int[list.size()];
    for (int i = 0; i < ids.length; i++) {
      JsonNode t = list.get(i);
      if (!t.isIntegralNumber() || !t.canConvertToInt() || t.asInt() < 0) {
        throw ApiException.badRequest("token ids must be non-negative integers", "prompt");
      }
      ids[i] = t.asInt();
    }
    return ids;
  }

  private static boolean bool(JsonNode n, String field, boolean dflt) throws ApiException {
    JsonNode v = n.get(field);
    if (v == null || v.isNull()) {
      return dflt;
    }
    if (!v.isBoolean()) {
      throw ApiException.badRequest("`" + field + "` must be a boolean", field);
    }
    return v.asBoolean();
  }
}
