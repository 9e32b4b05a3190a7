package dev.kvrouter.extproc.request;

import dev.kvrouter.extproc.model.InlineSystemMode;
import dev.kvrouter.extproc.request.RequestBodyParser.BadRequest;
import dev.kvrouter.extproc.template.jinja.PyRepr;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * An Anthropic Messages API request's {@code system} and {@code messages}, turned into the chat messages vLLM renders
 * with the model's chat template, so the chat pipeline (templating, tool-call arguments, tokenization) applies
 * unchanged.
 *
 * <p>Follows vLLM's {@code AnthropicServingMessages.to_chat_completion_request} (vllm/entrypoints/anthropic/serving.py)
 * and {@code normalize_inline_system} (inline_system.py), after pydantic has validated the request
 * ({@code AnthropicMessage}, {@code AnthropicContentBlock}: extra keys ignored). Images are not hashed on this path:
 * a request carrying one leaves its prompt unreproduced ({@link InferenceRequest#MESSAGES_MEDIA}).
 */
final class MessagesInput {

  /** Claude Code's per-request attribution line: vLLM drops system text that starts with it. */
  static final String BILLING_HEADER = "x-anthropic-billing-header";

  private static final Set<String> BLOCK_TYPES = Set.of("text", "image", "tool_use", "tool_result", "tool_reference",
      "thinking", "redacted_thinking");
  /**
   * Roles Claude Code 2.1.154+ sends, read as {@code user} as vLLM's open PR 44737 maps them. vLLM main (a8c3bdb)
   * still refuses them (400); accepting them only hashes a request such a worker refuses, while refusing them would
   * turn away Claude Code in front of a worker that has the mapping.
   */
  private static final Map<String, String> ROLE_ALIASES = Map.of("ctx", "user", "msg", "user");

  /**
   * The conversation as vLLM templates it.
   *
   * @param messages chat messages, in the shape a chat request's {@code messages} has after parsing
   * @param unreproducible null, or why vLLM's prompt cannot be known from the body
   */
  record Converted(List<Map<String, Object>> messages, String unreproducible) {}

  /** One validated {@code AnthropicMessage}: content is a string or a list of block maps. */
  private record Message(String role, Object content) {}

  private MessagesInput() {}

  static Converted convert(Object system, Object rawMessages, InlineSystemMode mode) throws BadRequest {
    List<Message> messages = messages(rawMessages);
    checkSystem(system);
    boolean[] media = new boolean[1];
    List<Map<String, Object>> out = new ArrayList<>();
    Normalized n = mode == InlineSystemMode.MERGE ? merged(system, messages)
        : normalizeInlineSystem(system, messages, mode);
    String sys = mode == InlineSystemMode.MERGE ? n.leading() : join(systemPromptText(system), n.leading());
    if (!sys.isEmpty()) {
      out.add(message("system", sys));
    }
    for (Message m : n.messages()) {
      if (m.role().equals("system")) {
        String text = systemText(m);
        if (!text.isEmpty()) {
          out.add(message("system", text));
        }
        continue;
      }
      Map<String, Object> chat = new LinkedHashMap<>();
      chat.put("role", m.role());
      if (m.content() instanceof String s) {
        chat.put("content", s);
      } else {
        convertBlocks(m, chat, out, media);
      }
      if (!(m.role().equals("user") && !chat.containsKey("content"))) {
        out.add(chat);
      }
    }
    return new Converted(freeze(out), media[0] ? InferenceRequest.MESSAGES_MEDIA : null);
  }

  /** {@code _convert_message_content}: a user's tool results become tool messages ahead of the message itself. */
  @SuppressWarnings("unchecked")
  private static void convertBlocks(Message m, Map<String, Object> chat, List<Map<String, Object>> out,
      boolean[] media) throws BadRequest {
    List<Object> parts = new ArrayList<>();
    List<Object> calls = new ArrayList<>();
    StringBuilder reasoning = null;
    for (Object o : (List<Object>) m.content()) {
      Map<String, Object> b = (Map<String, Object>) o;
      switch ((String) b.get("type")) {
        case "text" -> {
          if (b.get("text") instanceof String t && !t.isEmpty()) {
            parts.add(textPart(t));
          }
        }
        case "image" -> {
          if (b.get("source") instanceof Map<?, ?> src && !src.isEmpty()) {
            media[0] = true;
          }
        }
        case "thinking" -> {
          if (b.get("thinking") instanceof String t) {
            reasoning = (reasoning == null ? new StringBuilder() : reasoning).append(t);
          }
        }
        case "tool_use" -> {
          Map<String, Object> fn = new LinkedHashMap<>();
          fn.put("name", b.get("name") == null ? "" : b.get("name"));
          // vLLM sends json.dumps(input) and the chat preprocessing parses it back: the same dict either way
          Object input = b.get("input");
          fn.put("arguments", input == null ? Map.of() : input);
          Map<String, Object> call = new LinkedHashMap<>();
          // an id-less call gets call_<unix seconds> there: a template that renders ids would differ by the clock
          call.put("id", PythonValues.truthy(b.get("id")) ? b.get("id") : "call_0");
          call.put("type", "function");
          call.put("function", Collections.unmodifiableMap(fn));
          calls.add(Collections.unmodifiableMap(call));
        }
        case "tool_result" -> {
          if (m.role().equals("user")) {
            userToolResult(b, out, media);
          } else {
            Object c = b.get("content");
            parts.add(textPart("Tool result: " + (PythonValues.truthy(c) ? PyRepr.str(c) : "")));
          }
        }
        default -> { } // redacted_thinking is opaque; tool_reference is read inside tool results
      }
    }
    if (reasoning != null) {
      chat.put("reasoning", reasoning.toString());
    }
    if (!calls.isEmpty()) {
      chat.put("tool_calls", Collections.unmodifiableList(calls));
    }
    if (parts.size() == 1) {
      chat.put("content", ((Map<?, ?>) parts.get(0)).get("text"));
    } else if (!parts.isEmpty()) {
      chat.put("content", Collections.unmodifiableList(parts));
    }
  }

  /** {@code _convert_user_tool_result}: its text, then its images as a user message, then its tool references. */
  private static void userToolResult(Map<String, Object> b, List<Map<String, Object>> out, boolean[] media)
      throws BadRequest {
    Object content = b.get("content");
    String text = "";
    List<Object> refs = new ArrayList<>();
    if (content instanceof String s) {
      text = s;
    } else if (content instanceof List<?> items) {
      List<String> texts = new ArrayList<>();
      for (Object o : items) {
        Map<?, ?> item = (Map<?, ?>) o;
        Object type = item.get("type");
        if ("text".equals(type)) {
          Object t = item.containsKey("text") ? item.get("text") : "";
          if (!(t instanceof String)) {
            // vLLM's "\n".join fails on it (a 500 there)
            throw RequestBodyParser.bad("a tool result's text must be a string", "messages");
          }
          texts.add((String) t);
        } else if ("image".equals(type)) {
          // _convert_image_source_to_url gives every source a URL (a data: URL by default) but a "url" one without
          // its url, which adds no image
          Object src = item.containsKey("source") ? item.get("source") : Map.of();
          if (!(src instanceof Map<?, ?> s && "url".equals(s.get("type")) && !PythonValues.truthy(s.get("url")))) {
            media[0] = true;
          }
        } else if ("tool_reference".equals(type)) {
          Object name = PythonValues.truthy(item.get("tool_name")) ? item.get("tool_name") : item.get("name");
          if (PythonValues.truthy(name)) {
            Map<String, Object> ref = new LinkedHashMap<>();
            ref.put("type", "tool_reference");
            ref.put("name", name);
            refs.add(Collections.unmodifiableMap(ref));
          }
        }
      }
      text = String.join("\n", texts);
    }
    Object id = PythonValues.truthy(b.get("tool_use_id")) ? b.get("tool_use_id") : "";
    Map<String, Object> tool = message("tool", text);
    tool.put("tool_call_id", id);
    out.add(tool);
    if (!refs.isEmpty()) {
      Map<String, Object> ref = message("tool", Collections.unmodifiableList(refs));
      ref.put("tool_call_id", id);
      out.add(ref);
    }
  }

  /** {@code normalize_inline_system}'s result: text for the system prompt, and the messages left. */
  private record Normalized(String leading, List<Message> messages) {}

  private static Normalized normalizeInlineSystem(Object system, List<Message> messages, InlineSystemMode mode)
      throws BadRequest {
    if (messages.stream().noneMatch(m -> m.role().equals("system"))) {
      return new Normalized("", messages);
    }
    int lead = 0;
    while (lead < messages.size() && messages.get(lead).role().equals("system")) {
      lead++;
    }
    String leading = join(messages.subList(0, lead).stream().map(MessagesInput::systemText).toArray(String[]::new));
    List<Message> rest = outOfToolRuns(messages.subList(lead, messages.size()));
    if (mode == InlineSystemMode.PRESERVE && !(systemPromptText(system).isEmpty() && leading.isEmpty())) {
      return new Normalized(leading, rest);
    }
    List<Message> out = new ArrayList<>();
    List<String> pending = new ArrayList<>();
    // texts bound for the user turn out ends with, appended at once: one by one, each append copied all the text
    // before it (a long run of system messages cost time quadratic in its length); join is associative, so the
    // text is the same
    List<String> onto = new ArrayList<>();
    for (Message m : rest) {
      if (m.role().equals("system")) {
        String text = systemText(m);
        if (text.isEmpty()) {
          continue;
        }
        if (!out.isEmpty() && out.get(out.size() - 1).role().equals("user") && pending.isEmpty()) {
          onto.add(text);
        } else {
          pending.add(text);
        }
        continue;
      }
      appendTo(out, onto);
      if (!pending.isEmpty()) {
        String text = join(pending.toArray(String[]::new));
        pending.clear();
        if (m.role().equals("user")) {
          m = new Message("user", addText(m.content(), text, false));
        } else {
          out.add(new Message("user", text));
        }
      }
      out.add(m);
    }
    appendTo(out, onto);
    if (!pending.isEmpty()) {
      out.add(new Message("user", join(pending.toArray(String[]::new))));
    }
    return new Normalized(leading, out);
  }

  /** Appends the gathered {@code texts} to the user turn {@code out} ends with, and clears them. */
  private static void appendTo(List<Message> out, List<String> texts) throws BadRequest {
    if (!texts.isEmpty()) {
      out.set(out.size() - 1, appendToUser(out.get(out.size() - 1), join(texts.toArray(String[]::new))));
      texts.clear();
    }
  }

  /**
   * vLLM before its template probe ({@code _convert_system_message}): the top-level system and every system message's
   * text, joined without a separator, lead; the system messages themselves go. A string {@code system} or message
   * content is taken whole (its billing header, if any, is left to the chat path's own strip); text blocks lose it.
   */
  private static Normalized merged(Object system, List<Message> messages) {
    StringBuilder sb = new StringBuilder();
    if (system instanceof String s) {
      sb.append(s);
    } else if (system != null) {
      sb.append(blocksText((List<?>) system));
    }
    List<Message> rest = new ArrayList<>();
    for (Message m : messages) {
      if (!m.role().equals("system")) {
        rest.add(m);
      } else if (m.content() instanceof String s) {
        sb.append(s);
      } else {
        sb.append(blocksText((List<?>) m.content()));
      }
    }
    return new Normalized(sb.toString(), rest);
  }

  /** {@code _move_out_of_tool_runs}: a system message between a tool use and its results waits until after them. */
  private static List<Message> outOfToolRuns(List<Message> messages) {
    List<Message> out = new ArrayList<>();
    List<Message> held = new ArrayList<>();
    boolean awaitingResults = false;
    for (Message m : messages) {
      if (m.role().equals("system")) {
        (awaitingResults ? held : out).add(m);
        continue;
      }
      if (m.role().equals("assistant")) {
        out.addAll(held);
        held.clear();
      }
      out.add(m);
      if (m.role().equals("user")) {
        out.addAll(held);
        held.clear();
      }
      awaitingResults = m.role().equals("assistant") && m.content() instanceof List<?> blocks
          && blocks.stream().anyMatch(b -> "tool_use".equals(((Map<?, ?>) b).get("type")));
    }
    out.addAll(held);
    return out;
  }

  /**
   * {@code _append_to_user}: onto the user's own text or, when the message holds only tool results, onto the last
   * result (its other blocks become the user message that follows the tool messages, so no turn is added).
   */
  @SuppressWarnings("unchecked")
  private static Message appendToUser(Message m, String text) throws BadRequest {
    if (m.content() instanceof List<?> blocks && !blocks.isEmpty()
        && blocks.stream().allMatch(b -> "tool_result".equals(((Map<?, ?>) b).get("type")))) {
      Map<String, Object> last = new LinkedHashMap<>((Map<String, Object>) blocks.get(blocks.size() - 1));
      last.put("content", addText(last.get("content"), text, true));
      List<Object> content = new ArrayList<>(blocks.subList(0, blocks.size() - 1));
      content.add(Collections.unmodifiableMap(last));
      return new Message(m.role(), Collections.unmodifiableList(content));
    }
    if (m.content() instanceof String s) {
      return new Message(m.role(), addText(s, text, true));
    }
    List<Object> results = new ArrayList<>();
    List<Object> own = new ArrayList<>();
    for (Object b : (List<Object>) m.content()) {
      ("tool_result".equals(((Map<?, ?>) b).get("type")) ? results : own).add(b);
    }
    results.addAll((List<Object>) addText(own, text, true));
    return new Message(m.role(), Collections.unmodifiableList(results));
  }

  /**
   * {@code _add_text}: joins {@code text} onto the text at one end of {@code content} (a string, null, or a list of
   * blocks), merging into an adjacent text block rather than adding one, since some templates concatenate text blocks
   * without a separator.
   */
  private static Object addText(Object content, String text, boolean atEnd) throws BadRequest {
    if (content == null || content instanceof String) {
      String s = content == null ? "" : (String) content;
      return atEnd ? join(s, text) : join(text, s);
    }
    List<Object> items = new ArrayList<>((List<?>) content);
    int end = atEnd ? items.size() - 1 : 0;
    if (!items.isEmpty() && "text".equals(((Map<?, ?>) items.get(end)).get("type"))) {
      @SuppressWarnings("unchecked")
      Map<String, Object> item = new LinkedHashMap<>((Map<String, Object>) items.get(end));
      // `text or ""`: a tool result's item is an unchecked dict, and _join fails on a truthy non-string (a 500)
      Object old = PythonValues.truthy(item.get("text")) ? item.get("text") : "";
      if (!(old instanceof String)) {
        throw RequestBodyParser.bad("a tool result's text must be a string", "messages");
      }
      item.put("text", atEnd ? join((String) old, text) : join(text, (String) old));
      items.set(end, Collections.unmodifiableMap(item));
    } else {
      items.add(atEnd ? items.size() : 0, textPart(text));
    }
    return Collections.unmodifiableList(items);
  }

  /** {@code system_text}: an inline system message's text, without Claude Code's billing header. */
  private static String systemText(Message m) {
    if (m.content() instanceof String s) {
      return s.startsWith(BILLING_HEADER) ? "" : s;
    }
    return blocksText((List<?>) m.content());
  }

  /** {@code system_prompt_text}: the top-level {@code system}; a plain string is kept whole. */
  private static String systemPromptText(Object system) {
    if (system == null || system instanceof String) {
      return system == null ? "" : (String) system;
    }
    return blocksText((List<?>) system);
  }

  private static String blocksText(List<?> blocks) {
    StringBuilder sb = new StringBuilder();
    for (Object o : blocks) {
      Map<?, ?> b = (Map<?, ?>) o;
      if ("text".equals(b.get("type")) && b.get("text") instanceof String t && !t.isEmpty()
          && !t.startsWith(BILLING_HEADER)) {
        sb.append(t);
      }
    }
    return sb.toString();
  }

  /** {@code _join}: the non-empty texts, a blank line between them. */
  private static String join(String... texts) {
    StringBuilder sb = new StringBuilder();
    for (String t : texts) {
      if (!t.isEmpty()) {
        if (sb.length() > 0) {
          sb.append("\n\n");
        }
        sb.append(t);
      }
    }
    return sb.toString();
  }

  // --- validation, as pydantic's models accept or refuse the request ---

  private static List<Message> messages(Object raw) throws BadRequest {
    if (!(raw instanceof List<?> list)) {
      throw RequestBodyParser.bad("`messages` must be a list", "messages");
    }
    List<Message> out = new ArrayList<>(list.size());
    for (int i = 0; i < list.size(); i++) {
      String at = "messages[" + i + "]";
      if (!(list.get(i) instanceof Map<?, ?> m)) {
        throw RequestBodyParser.bad("`" + at + "` must be an object", at);
      }
      // Map.of's lookups throw on null: a message without a role is the client's 400, not the router's 500
      Object role = m.get("role") instanceof String r ? ROLE_ALIASES.getOrDefault(r, r) : null;
      if (!"user".equals(role) && !"assistant".equals(role) && !"system".equals(role)) {
        throw RequestBodyParser.bad("`" + at + ".role` must be one of user, assistant, system", at + ".role");
      }
      out.add(new Message((String) role, content(m.get("content"), at + ".content")));
    }
    return out;
  }

  private static void checkSystem(Object system) throws BadRequest {
    if (system != null && !(system instanceof String)) {
      content(system, "system");
    }
  }

  /** A string, or a list of {@code AnthropicContentBlock}s. */
  private static Object content(Object content, String at) throws BadRequest {
    if (content instanceof String) {
      return content;
    }
    if (!(content instanceof List<?> blocks)) {
      throw RequestBodyParser.bad("`" + at + "` must be a string or a list of content blocks", at);
    }
    for (int j = 0; j < blocks.size(); j++) {
      String b = at + "[" + j + "]";
      if (!(blocks.get(j) instanceof Map<?, ?> block)) {
        throw RequestBodyParser.bad("`" + b + "` must be an object", b);
      }
      if (!(block.get("type") instanceof String type) || !BLOCK_TYPES.contains(type)) {
        throw RequestBodyParser.bad("`" + b + ".type` must be one of " + String.join(", ", sorted(BLOCK_TYPES)),
            b + ".type");
      }
      for (String key : new String[] {"text", "id", "tool_use_id", "name", "tool_name", "thinking", "signature",
          "data"}) {
        optional(block, key, String.class, "a string", b);
      }
      optional(block, "source", Map.class, "an object", b);
      optional(block, "input", Map.class, "an object", b);
      if (block.get("is_error") != null && PythonValues.laxBool(block.get("is_error")) == null) {
        throw RequestBodyParser.bad("`" + b + ".is_error` must be a boolean", b + ".is_error");
      }
      Object c = block.get("content");
      if (c != null && !(c instanceof String)) {
        if (!(c instanceof List<?> items) || !items.stream().allMatch(x -> x instanceof Map)) {
          throw RequestBodyParser.bad("`" + b + ".content` must be a string or a list of objects", b + ".content");
        }
      }
    }
    return content;
  }

  private static void optional(Map<?, ?> block, String key, Class<?> type, String what, String at)
      throws BadRequest {
    Object v = block.get(key);
    if (v != null && !type.isInstance(v)) {
      throw RequestBodyParser.bad("`" + at + "." + key + "` must be " + what, at + "." + key);
    }
  }

  private static List<String> sorted(Set<String> s) {
    List<String> l = new ArrayList<>(s);
    Collections.sort(l);
    return l;
  }

  private static Map<String, Object> textPart(String text) {
    Map<String, Object> p = new LinkedHashMap<>();
    p.put("type", "text");
    p.put("text", text);
    return Collections.unmodifiableMap(p);
  }

  private static Map<String, Object> message(String role, Object content) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("role", role);
    m.put("content", content);
    return m;
  }

  private static List<Map<String, Object>> freeze(List<Map<String, Object>> messages) {
    List<Map<String, Object>> out = new ArrayList<>(messages.size());
    for (Map<String, Object> m : messages) {
      out.add(Collections.unmodifiableMap(m));
    }
    return Collections.unmodifiableList(out);
  }
}
