package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.core.JsonFactory;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.extproc.request.OpenAiError;
import java.util.ArrayList;
import java.util.List;

/**
 * Parses and validates {@code /v1/completions} and {@code /v1/chat/completions} bodies the way vLLM's OpenAI
 * server does, as far as the simulated engine is concerned. Thread-safe.
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

  private final EngineConfig config;
  private final PromptEncoder encoder;

  ApiRequestParser(EngineConfig config, PromptEncoder encoder) {
    this.config = config;
    this.encoder = encoder;
  }

  ApiRequest parse(boolean chat, byte[] body) throws ApiException {
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
    JsonNode m = root.get("model");
    if (m == null || !m.isTextual() || m.asText().isEmpty()) {
      throw ApiException.badRequest("you must provide a `model` string", "model");
    }
    String model = m.asText();
    String adapter = null;
    if (!model.equals(config.model())) {
      if (!config.adapters().contains(model)) {
        throw new ApiException(new OpenAiError(404, "NotFoundError", "model_not_found",
            "The model `" + model + "` does not exist.", "model"));
      }
      adapter = model;
    }
    boolean stream = bool(root, "stream", false);
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
    int maxTokens = maxTokens(root, chat);
    String salt = null;
    JsonNode cs = root.get("cache_salt");
    if (cs != null && !cs.isNull()) {
      if (!cs.isTextual() || cs.asText().isEmpty()) {
        throw ApiException.badRequest("`cache_salt` must be a non-empty string", "cache_salt");
      }
      salt = cs.asText();
    }
    long seed = 0;
    boolean seeded = false;
    JsonNode sd = root.get("seed");
    if (sd != null && !sd.isNull()) {
      if (!sd.canConvertToLong()) {
        throw ApiException.badRequest("`seed` must be an integer", "seed");
      }
      seed = sd.asLong();
      seeded = true;
    }
    if (chat) {
      PromptEncoder.ChatTokens prompt = chatPrompt(root);
      return new ApiRequest(true, model, adapter, List.of(prompt.tokens()), maxTokens, stream, includeUsage, salt,
          seed, seeded, prompt.media());
    }
    return new ApiRequest(false, model, adapter, completionPrompts(root.get("prompt")), maxTokens, stream,
        includeUsage, salt, seed, seeded, List.of());
  }

  private int maxTokens(JsonNode root, boolean chat) throws ApiException {
    JsonNode v = root.get("max_completion_tokens");
    String param = "max_completion_tokens";
    if (v == null || v.isNull()) {
      v = root.get("max_tokens");
      param = "max_tokens";
    }
    if (v == null || v.isNull()) {
      return chat ? DEFAULT_CHAT_MAX_TOKENS : DEFAULT_COMPLETION_MAX_TOKENS;
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
    try {
      return encoder.encodeChatPrompt(root);
    } catch (PromptEncoder.BadInput e) {
      throw ApiException.badRequest(e.getMessage(), "messages");
    } catch (PromptEncoder.Unsupported e) {
      throw new ApiException(new OpenAiError(501, "NotImplementedError", "not_implemented", e.getMessage(),
          "messages"));
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
