package dev.kvrouter.extproc.request;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import dev.kvrouter.extproc.request.RequestBodyParser.BadRequest;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A Responses API request's {@code instructions} and {@code input}, turned into the chat messages vLLM renders with
 * the model's chat template, so the chat pipeline (content parts, media, templating, tokenization) applies unchanged.
 *
 * <p>Follows vLLM's non-Harmony path ({@code OnlineRenderer.render_responses}, formerly
 * {@code OpenAIServingResponses._make_request}): {@code construct_input_messages},
 * {@code construct_chat_messages_with_tool_call} and {@code _construct_message_from_response_item} in
 * {@code vllm/entrypoints/openai/responses/utils.py}, after {@code ResponsesRequest.input_item_parsing} (protocol.py)
 * has typed {@code function_call}, {@code reasoning} and list-content assistant {@code message} items. Items vLLM
 * would pass through untranslated, and stored conversations, are not guessed: they leave the prompt unreproduced
 * with a reason (see {@link InferenceRequest}).
 */
final class ResponsesInput {

  private static final Set<String> MESSAGE_ROLES = Set.of("user", "assistant", "system", "developer");
  private static final Set<String> PARTIAL = Set.of("in_progress", "incomplete");
  /** {@code vllm/tool_parsers/utils.py}: {@code _NAMESPACE_TOOL_SEPARATOR}. */
  static final String NAMESPACE_SEPARATOR = "__";

  /**
   * The conversation as vLLM templates it.
   *
   * @param messages chat messages, in the shape a chat request's {@code messages} has after parsing
   * @param continueFinalMessage {@code should_continue_final_message}: the last item is a partial message or
   *     reasoning item, so the template continues it instead of adding a generation prompt
   * @param unreproducible null, or why vLLM's messages cannot be known from the body
   */
  record Converted(List<Map<String, Object>> messages, boolean continueFinalMessage, String unreproducible) {}

  private ResponsesInput() {}

  /**
   * Reads {@code input} (the current token is its value): a string, or the list of items with their content parts
   * read like chat content, so media is identified (and its payload hashed, not kept) the way chat's is.
   */
  static Object read(JsonParser p, JsonToken v, MediaParts media) throws IOException, BadRequest {
    if (v == JsonToken.VALUE_STRING) {
      return p.getText();
    }
    if (v != JsonToken.START_ARRAY) {
      p.skipChildren();
      throw RequestBodyParser.bad("`input` must be a string or a list of input items", "input");
    }
    List<Map<String, Object>> items = new ArrayList<>();
    JsonToken t;
    int i = 0;
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      if (t != JsonToken.START_OBJECT) {
        throw RequestBodyParser.bad("`input[" + i + "]` must be an object", "input[" + i + "]");
      }
      String before = media.unreproducible;
      Map<String, Object> item = new LinkedHashMap<>();
      // content and output may both hold parts, and the type (which says which one is templated) may come last
      Map<String, MediaParts.Section> sections = new HashMap<>(2);
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String k = p.currentName();
        JsonToken kv = p.nextToken();
        boolean parts = k.equals("content") || k.equals("output");
        if (parts) {
          sections.remove(k); // a repeated key replaces the earlier value, its media with it
        }
        if (parts && kv == JsonToken.START_ARRAY) {
          item.put(k, objectParts(media.readParts(p, i, "input[" + i + "]." + k), "input[" + i + "]." + k));
          sections.put(k, media.takeSection(before));
        } else {
          item.put(k, JsonValues.read(p, kv));
        }
      }
      MediaParts.Section templated = sections.get(templatedParts(item));
      if (templated != null) {
        media.restore(templated);
        media.endMessage();
      }
      items.add(Collections.unmodifiableMap(item));
      i++;
    }
    return Collections.unmodifiableList(items);
  }

  /** The SDK's part lists are lists of typed dicts: chat's bare string parts are not among them. */
  private static List<Object> objectParts(List<Object> parts, String path) throws BadRequest {
    for (int j = 0; j < parts.size(); j++) {
      if (!(parts.get(j) instanceof Map)) {
        throw RequestBodyParser.bad("`" + path + "[" + j + "]` must be an object", path + "[" + j + "]");
      }
    }
    return parts;
  }

  /**
   * The key whose parts reach the template as content parts: a user, system or developer message's content, a tool
   * output's output; null for the other items (an assistant item keeps only its first part's text, a reasoning
   * item's parts are not content parts at all).
   */
  private static String templatedParts(Map<String, Object> item) {
    Object type = item.get("type");
    if ("function_call_output".equals(type)) {
      return "output";
    }
    Object role = item.get("role");
    return (type == null || "message".equals(type)) && role != null && !"assistant".equals(role) ? "content" : null;
  }

  /** {@code construct_input_messages} without a previous response (a stored one is never reproduced). */
  static Converted convert(String instructions, Object input) throws BadRequest {
    List<Map<String, Object>> messages = new ArrayList<>();
    if (instructions != null && !instructions.isEmpty()) {
      messages.add(message("system", "content", instructions));
    }
    if (input instanceof String s) {
      messages.add(message("user", "content", s));
      return new Converted(freeze(messages), false, null);
    }
    List<?> items = (List<?>) input;
    for (int i = 0; i < items.size(); i++) {
      @SuppressWarnings("unchecked")
      Map<String, Object> item = (Map<String, Object>) items.get(i);
      Map<String, Object> prev = messages.isEmpty() ? null : messages.get(messages.size() - 1);
      Map<String, Object> prevAssistant = prev != null && "assistant".equals(prev.get("role")) ? prev : null;
      String at = "input[" + i + "]";
      Object type = item.get("type");
      if (item.containsKey("type") && !(type instanceof String)) {
        throw RequestBodyParser.bad("`" + at + ".type` must be a string", at + ".type");
      }
      Map<String, Object> next;
      switch (type == null ? "message" : (String) type) {
        case "message" -> {
          String role = role(item, at);
          if (!role.equals("assistant")) {
            // vLLM passes these items on as chat messages; pydantic kept only the declared keys
            next = message(role, "content", inputParts(content(item, at), at));
          } else {
            Object text = assistantText(item, type != null, at);
            if (text == null) {
              return new Converted(List.of(), false, InferenceRequest.RESPONSES_ITEM);
            }
            next = mergeOrNew(prevAssistant, "content", text);
          }
        }
        case "function_call" -> next = mergeToolCall(prevAssistant, toolCall(item, at));
        case "function_call_output" -> {
          Object output = item.get("output");
          if (!(output instanceof String) && !(output instanceof List)) {
            throw RequestBodyParser.bad("`" + at + ".output` must be a string or a list of content parts",
                at + ".output");
          }
          next = message("tool", "content", output);
          next.put("tool_call_id", string(item, "call_id", at));
        }
        case "reasoning" -> next = mergeOrNew(prevAssistant, "reasoning", reasoningText(item, at));
        // file_search_call, computer_call, web_search_call, mcp_*, item_reference, custom tool calls...: vLLM hands
        // the raw item to the chat template as if it were a message; what that renders is not a prompt to guess
        default -> {
          return new Converted(List.of(), false, InferenceRequest.RESPONSES_ITEM);
        }
      }
      if (next != null) {
        messages.add(next);
      }
    }
    return new Converted(freeze(messages), continuesFinal(items), null);
  }

  /**
   * {@code should_continue_final_message}: a last message or reasoning item that is in progress or incomplete, by
   * the status pydantic kept. Only the item models that declare one keep it: the reasoning item, the typed assistant
   * message with list content ({@code ResponseOutputMessage}) and the input {@code Message} (list content, other
   * roles); string content and untyped assistant items validate as {@code EasyInputMessage}, which drops it.
   */
  private static boolean continuesFinal(List<?> items) {
    if (items.isEmpty()) {
      return false;
    }
    Map<?, ?> last = (Map<?, ?>) items.get(items.size() - 1);
    Object type = last.get("type");
    boolean keepsStatus = "reasoning".equals(type) || (type == null || "message".equals(type))
        && last.get("content") instanceof List && (type != null || !"assistant".equals(last.get("role")));
    return keepsStatus && last.get("status") instanceof String s && PARTIAL.contains(s);
  }

  private static String role(Map<String, Object> item, String at) throws BadRequest {
    if (!(item.get("role") instanceof String r) || !MESSAGE_ROLES.contains(r)) {
      throw RequestBodyParser.bad("`" + at + ".role` must be one of user, assistant, system, developer",
          at + ".role");
    }
    return r;
  }

  private static Object content(Map<String, Object> item, String at) throws BadRequest {
    Object content = item.get("content");
    if (!(content instanceof String) && !(content instanceof List)) {
      throw RequestBodyParser.bad("`" + at + ".content` must be a string or a list of content parts",
          at + ".content");
    }
    return content;
  }

  /**
   * An assistant item's text: vLLM keeps only its first part's. A typed {@code message} whose parts are all output
   * parts became a {@code ResponseOutputMessage}, whose first part's {@code .text} a refusal part lacks (vLLM fails
   * there), so that one is not reproduced (null); any other form is an {@code EasyInputMessage} of input parts and
   * reads {@code text} with an empty default.
   */
  private static Object assistantText(Map<String, Object> item, boolean typed, String at) throws BadRequest {
    Object content = content(item, at);
    if (content instanceof String s) {
      return s;
    }
    List<?> parts = (List<?>) content;
    if (!(typed && outputParts(parts))) {
      inputParts(parts, at);
    }
    if (parts.isEmpty()) {
      return "";
    }
    Map<?, ?> part = (Map<?, ?>) parts.get(0);
    if ("refusal".equals(part.get("type"))) {
      return null;
    }
    return part.containsKey("text") ? part.get("text") : "";
  }

  /** {@code ResponseOutputMessage}'s parts: output_text with a string text, refusal with a string refusal. */
  private static boolean outputParts(List<?> parts) {
    for (Object o : parts) {
      Map<?, ?> part = (Map<?, ?>) o;
      Object type = part.get("type");
      if (!("output_text".equals(type) && part.get("text") instanceof String
          || "refusal".equals(type) && part.get("refusal") instanceof String)) {
        return false;
      }
    }
    return true;
  }

  /**
   * A message's parts are the SDK's {@code ResponseInputMessageContentList}: input_text with a string text,
   * input_image with its (required) detail, input_file. Chat's part types are not among them.
   */
  private static Object inputParts(Object content, String at) throws BadRequest {
    if (!(content instanceof List<?> parts)) {
      return content;
    }
    for (int j = 0; j < parts.size(); j++) {
      Map<?, ?> part = (Map<?, ?>) parts.get(j);
      String where = at + ".content[" + j + "]";
      Object type = part.get("type");
      String required = "input_text".equals(type) ? "text" : "input_image".equals(type) ? "detail"
          : "input_file".equals(type) ? null : "type";
      if ("type".equals(required)) {
        throw RequestBodyParser.bad("`" + where + ".type` must be input_text, input_image or input_file",
            where + ".type");
      }
      if (required != null && !(part.get(required) instanceof String)) {
        throw RequestBodyParser.bad("`" + where + "." + required + "` must be a string", where + "." + required);
      }
    }
    return content;
  }

  private static Map<String, Object> toolCall(Map<String, Object> item, String at) throws BadRequest {
    String name = string(item, "name", at);
    Object namespace = item.get("namespace");
    if (namespace != null && !(namespace instanceof String)) {
      throw RequestBodyParser.bad("`" + at + ".namespace` must be a string", at + ".namespace");
    }
    if (namespace instanceof String ns && !ns.isEmpty()) {
      name = ns + NAMESPACE_SEPARATOR + name; // flat_namespace_tool_name
    }
    Map<String, Object> function = new LinkedHashMap<>();
    function.put("name", name);
    function.put("arguments", string(item, "arguments", at));
    Map<String, Object> call = new LinkedHashMap<>();
    call.put("id", string(item, "call_id", at));
    call.put("function", Collections.unmodifiableMap(function));
    call.put("type", "function");
    return call;
  }

  /** A function call joins the assistant message before it (its first call starts the list), else starts one. */
  private static Map<String, Object> mergeToolCall(Map<String, Object> prevAssistant, Map<String, Object> call) {
    if (prevAssistant != null) {
      @SuppressWarnings("unchecked")
      List<Object> calls = (List<Object>) prevAssistant.get("tool_calls");
      if (calls == null) {
        calls = new ArrayList<>();
        prevAssistant.put("tool_calls", calls);
      }
      calls.add(call);
      return null;
    }
    List<Object> calls = new ArrayList<>();
    calls.add(call);
    return message("assistant", "tool_calls", calls);
  }

  /** Content or reasoning fills the assistant message before it when that has none yet, else starts a message. */
  private static Map<String, Object> mergeOrNew(Map<String, Object> prevAssistant, String key, Object value) {
    if (prevAssistant != null && prevAssistant.get(key) == null) {
      prevAssistant.put(key, value);
      return null;
    }
    return message("assistant", key, value);
  }

  /**
   * A reasoning item's text: its first content part's, else its first summary part's, else empty. Encrypted
   * reasoning is refused as vLLM refuses it.
   */
  private static Object reasoningText(Map<String, Object> item, String at) throws BadRequest {
    if (PythonValues.truthy(item.get("encrypted_content"))) {
      throw RequestBodyParser.bad("Encrypted content is not supported.", at + ".encrypted_content");
    }
    if (!(item.get("summary") instanceof List<?> summary)) {
      throw RequestBodyParser.bad("`" + at + ".summary` must be a list", at + ".summary");
    }
    Object content = item.get("content");
    if (content != null && !(content instanceof List)) {
      throw RequestBodyParser.bad("`" + at + ".content` must be a list", at + ".content");
    }
    List<?> from = content != null && !((List<?>) content).isEmpty() ? (List<?>) content : summary;
    texts(from, at + (from == summary ? ".summary" : ".content"));
    return from.isEmpty() ? "" : ((Map<?, ?>) from.get(0)).get("text");
  }

  /**
   * Every entry of the list the text comes from is a typed dict with a string text: a malformed entry fails the
   * item's model, and vLLM's dict-form fallback then validates the list it reads (only that one) as it iterates it.
   */
  private static void texts(List<?> entries, String path) throws BadRequest {
    for (int j = 0; j < entries.size(); j++) {
      if (!(entries.get(j) instanceof Map<?, ?> e) || !(e.get("text") instanceof String)) {
        String where = path + "[" + j + "].text";
        throw RequestBodyParser.bad("`" + where + "` must be a string", where);
      }
    }
  }

  private static String string(Map<String, Object> item, String key, String at) throws BadRequest {
    if (!(item.get(key) instanceof String s)) {
      throw RequestBodyParser.bad("`" + at + "." + key + "` must be a string", at + "." + key);
    }
    return s;
  }

  private static Map<String, Object> message(String role, String key, Object value) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("role", role);
    m.put(key, value);
    return m;
  }

  private static List<Map<String, Object>> freeze(List<Map<String, Object>> messages) {
    List<Map<String, Object>> out = new ArrayList<>(messages.size());
    for (Map<String, Object> m : messages) {
      Object calls = m.get("tool_calls");
      if (calls instanceof List<?> l) {
        m.put("tool_calls", List.copyOf(l));
      }
      out.add(Collections.unmodifiableMap(m));
    }
    return Collections.unmodifiableList(out);
  }
}
