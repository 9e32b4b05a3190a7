package dev.kvrouter.extproc.template;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import dev.kvrouter.extproc.template.jinja.PyOps;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * vLLM's message preprocessing before the chat template ({@code parse_chat_messages} and
 * {@code _postprocess_messages}, in {@code vllm/renderers/chat_utils/chat_message.py} as of vLLM 0.33.0,
 * formerly {@code vllm/entrypoints/chat_utils.py}), tool dumping and
 * kwargs resolution in the OpenAI server and {@code vllm/renderers/hf.py}). docs/templates.md
 * lists what is matched and what is left out.
 *
 * <p>Stateless apart from its configuration; thread-safe.
 */
public final class VllmChatPreprocessor {
  /** transformers' apply_chat_template named parameters, which vLLM always lets through. */
  static final Set<String> HF_PARAMS = Set.of("conversation", "tools", "documents", "chat_template",
      "add_generation_prompt", "continue_final_message", "tokenize", "sanitize_control_tokens", "padding",
      "truncation", "max_length", "return_tensors", "return_dict", "return_assistant_tokens_mask", "tokenizer_kwargs");

  private static final Set<String> TEXT_PARTS = Set.of("text", "input_text", "output_text", "refusal", "thinking");
  private static final Map<String, String> MEDIA_MODALITY = Map.ofEntries(
      Map.entry("image_url", "image"), Map.entry("input_image", "image"), Map.entry("image_pil", "image"),
      Map.entry("image_embeds", "image"), Map.entry("audio_url", "audio"), Map.entry("input_audio", "audio"),
      Map.entry("audio_embeds", "audio"), Map.entry("video_url", "video"), Map.entry("video_embeds", "video"));
  private static final List<String> UNTYPED_MEDIA_KEYS = List.of("image_url", "image_pil", "image_embeds",
      "audio_embeds", "video_embeds", "prompt_embeds", "audio_url", "input_audio", "video_url", "tool_reference");

  /**
   * Tokenizer for Python's json.loads (duplicate keys: the last wins): NaN/Infinity/-Infinity
   * allowed (Jackson's other spellings are refused in {@link #pyJsonValue}), numbers of any length
   * (Python parses floats of any length and ints up to {@link #MAX_INT_DIGITS} digits), nesting
   * bounded by {@link #MAX_JSON_DEPTH} ourselves.
   */
  private static final JsonFactory PY_JSON = JsonFactory.builder()
      .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
      .streamReadConstraints(StreamReadConstraints.builder()
          .maxNumberLength(Integer.MAX_VALUE).maxNestingDepth(Integer.MAX_VALUE)
          .maxStringLength(Integer.MAX_VALUE).maxNameLength(Integer.MAX_VALUE).build())
      .build();
  /** Python's int/str conversion limit (sys.int_info.default_max_str_digits): more digits raise ValueError. */
  static final int MAX_INT_DIGITS = 4300;
  /**
   * json.loads raises RecursionError near 1,000 levels; where exactly depends on the Python version
   * (3.11 counts Python frames, 3.12+ a separate C limit) and on the caller's stack. Deeper values
   * are refused, so such a request is load-balanced rather than routed on a guess.
   */
  static final int MAX_JSON_DEPTH = 900;

  private final ContentFormat format;
  private final Map<String, String> mediaPlaceholders;

  /**
   * @param format the content format (detected with {@link ContentFormat#detect} or configured)
   * @param mediaPlaceholders for string-format templates with image/audio/video parts: the
   *     placeholder text the model's multimodal processor inserts per modality (vLLM takes it
   *     from the processor; we need it configured). Without one, media parts fail.
   */
  public VllmChatPreprocessor(ContentFormat format, Map<String, String> mediaPlaceholders) {
    this.format = Objects.requireNonNull(format, "format");
    this.mediaPlaceholders = Map.copyOf(mediaPlaceholders);
  }

  public VllmChatPreprocessor(ContentFormat format) {
    this(format, Map.of());
  }

  public ContentFormat format() {
    return format;
  }

  /** {@code parse_chat_messages}: the conversation the template will see. */
  public List<Map<String, Object>> conversation(List<? extends Map<String, ?>> messages) {
    List<Map<String, Object>> out = new ArrayList<>(messages.size());
    for (Map<String, ?> m : messages) {
      out.add(parseMessage(m));
    }
    postprocess(out);
    return out;
  }

  private Map<String, Object> parseMessage(Map<String, ?> message) {
    Object role = message.get("role");
    if (!(role instanceof String)) {
      throw new ChatInputException("every message needs a string 'role'");
    }
    Object content = message.get("content");
    if (role.equals("system")) {
      content = stripBillingHeader(content);
    }
    List<?> parts;
    if (content == null) {
      parts = List.of();
    } else if (content instanceof String s) {
      parts = format == ContentFormat.OPENAI ? List.of(Map.of("type", "text", "text", s)) : null;
    } else if (content instanceof List<?> l) {
      parts = l;
    } else {
      throw new ChatInputException("message content must be a string, a list of content parts, or null");
    }
    Map<String, Object> result = new LinkedHashMap<>();
    result.put("role", role);
    // A plain string under a string-format template is its own result: skip the part list and the copy.
    result.put("content", parts == null ? content : parseParts(parts));

    if (role.equals("assistant")) {
      Object toolCalls = message.get("tool_calls");
      if (message.containsKey("tool_calls") && toolCalls != null) {
        if (!(toolCalls instanceof List<?> l)) {
          throw new ChatInputException("tool_calls must be a list");
        }
        result.put("tool_calls", deepCopy(l));
      }
      Object reasoning = message.get("reasoning");
      if (reasoning != null) {
        result.put("reasoning", reasoning);
        result.put("reasoning_content", reasoning);
      }
    } else if (role.equals("tool")) {
      if (message.containsKey("tool_call_id")) {
        result.put("tool_call_id", message.get("tool_call_id"));
      }
      if (result.get("content") instanceof List<?> items) {
        boolean nonText = items.stream().anyMatch(i -> i instanceof Map<?, ?> d && !"text".equals(d.get("type")));
        if (!nonText) {
          List<String> texts = new ArrayList<>();
          for (Object i : items) {
            if (i instanceof Map<?, ?> d && "text".equals(d.get("type"))) {
              Object t = d.get("text");
              texts.add(t == null ? "" : t.toString());
            }
          }
          result.put("content", String.join("\n", texts));
        }
      }
    }
    if (message.get("name") instanceof String name) {
      result.put("name", name);
    }
    if (message.get("task") instanceof String task) {
      result.put("task", task);
    }
    if (role.equals("developer")) {
      result.put("tools", message.get("tools"));
    }
    return result;
  }

  static final String BILLING_HEADER = "x-anthropic-billing-header";

  /**
   * vLLM's {@code _strip_claude_code_billing_header} ({@code vllm/renderers/chat_utils/chat_message.py}, 0.33.0),
   * which {@code parse_chat_message_content} applies to system messages only: a text (a bare string part, a
   * {@code "text"} part, or string content, which vLLM wraps in one text part first) starting with Claude Code's
   * {@code x-anthropic-billing-header} loses its first line, and disappears if nothing follows it. The header's
   * {@code cch} changes on every request, so keeping it would end the cached prefix right there. Returns
   * {@code content} itself when nothing starts with the header.
   */
  static Object stripBillingHeader(Object content) {
    if (content instanceof String s) {
      if (!s.startsWith(BILLING_HEADER)) {
        return s;
      }
      String rest = afterFirstLine(s);
      return rest.isEmpty() ? List.of() : rest;
    }
    if (!(content instanceof List<?> parts)) {
      return content;
    }
    List<Object> out = null;
    for (int i = 0; i < parts.size(); i++) {
      Object part = parts.get(i);
      Object text = part instanceof String ? part
          : part instanceof Map<?, ?> p && "text".equals(p.get("type")) ? p.get("text") : null;
      if (!(text instanceof String s && s.startsWith(BILLING_HEADER))) {
        if (out != null) {
          out.add(part);
        }
        continue;
      }
      if (out == null) {
        out = new ArrayList<>(parts.subList(0, i));
      }
      String rest = afterFirstLine(s);
      if (rest.isEmpty()) {
        continue;
      }
      if (part instanceof String) {
        out.add(rest);
      } else {
        // {**part, "text": rest}: same keys in the same order, only the text replaced
        Map<String, Object> copy = new LinkedHashMap<>();
        ((Map<?, ?>) part).forEach((k, v) -> copy.put(String.valueOf(k), v));
        copy.put("text", rest);
        out.add(copy);
      }
    }
    return out == null ? content : out;
  }

  /** Python's {@code s.partition("\n")[2]}: what follows the first newline, or "" without one. */
  private static String afterFirstLine(String s) {
    int nl = s.indexOf('\n');
    return nl < 0 ? "" : s.substring(nl + 1);
  }

  /** {@code _parse_chat_message_content_parts}: a string (STRING) or a list of parts (OPENAI). */
  private Object parseParts(List<?> parts) {
    boolean wrap = format == ContentFormat.OPENAI;
    List<Object> content = new ArrayList<>();
    List<String> placeholders = new ArrayList<>();
    // vLLM keeps a parsed part only `if parse_res:`. Under "openai" every part is a dict, so all are kept; under
    // "string" a part is its text, and an empty text (or tool_reference name) is dropped before the "\n" join.
    for (Object part : parts) {
      if (part instanceof String s) {
        if (wrap || !s.isEmpty()) {
          content.add(wrap ? textPart(s) : s);
        }
        continue;
      }
      if (!(part instanceof Map<?, ?> p)) {
        throw new ChatInputException("content parts must be strings or objects");
      }
      String[] parsed = partType(p);
      String type = parsed[0];
      Object value = partValue(p, type, parsed[1] != null);
      if ((type.equals("text") || type.equals("refusal")) && value == null) {
        continue; // vLLM skips text parts without text
      }
      if (TEXT_PARTS.contains(type)) {
        if (!(value instanceof String s)) {
          throw new ChatInputException("text content parts need a string");
        }
        if (wrap || !s.isEmpty()) {
          content.add(wrap ? withUndeclaredKeys(textPart(s), p) : s);
        }
      } else if (type.equals("tool_reference")) {
        if (wrap || PyOps.truthy(value)) {
          content.add(wrap ? orderedMap("type", "tool_reference", "name", value) : value);
        }
      } else if (type.equals("prompt_embeds")) {
        throw new ChatInputException("prompt_embeds content parts are not supported by the router");
      } else if (MEDIA_MODALITY.containsKey(type)) {
        String modality = MEDIA_MODALITY.get(type);
        if (wrap) {
          content.add(withUndeclaredKeys(orderedMap("type", modality), p));
        } else {
          String placeholder = mediaPlaceholders.get(modality);
          if (placeholder == null) {
            throw new ChatInputException(modality + " content in a string-format chat template needs the model's "
                + modality + " placeholder configured");
          }
          placeholders.add(placeholder);
        }
      } else {
        throw new ChatInputException("Unsupported chat content part type: '" + type + "'");
      }
    }
    if (wrap) {
      return content;
    }
    String text;
    if (content.size() == 1) {
      text = content.get(0).toString(); // String.join would copy a lone part
    } else {
      List<String> texts = new ArrayList<>(content.size());
      for (Object c : content) {
        texts.add(c.toString());
      }
      text = String.join("\n", texts);
    }
    if (placeholders.isEmpty()) {
      return text;
    }
    // _get_full_multimodal_text_prompt: placeholders the text does not already carry go first.
    Map<String, Integer> missing = new LinkedHashMap<>();
    for (String p : placeholders) {
      missing.merge(p, 1, Integer::sum);
    }
    List<String> front = new ArrayList<>();
    for (Map.Entry<String, Integer> e : missing.entrySet()) {
      int n = e.getValue() - count(text, e.getKey());
      if (n < 0) {
        throw new ChatInputException("Found more '" + e.getKey() + "' placeholders in input prompt than actual"
            + " multimodal data items.");
      }
      for (int i = 0; i < n; i++) {
        front.add(e.getKey());
      }
    }
    if (!text.isEmpty()) {
      front.add(text);
    }
    return String.join("\n", front);
  }

  private static int count(String s, String sub) {
    int c = 0;
    for (int i = s.indexOf(sub); i >= 0; i = s.indexOf(sub, i + sub.length())) {
      c++;
    }
    return c;
  }

  /** {type, "untyped" marker}: the part type as vLLM's _parse_chat_message_content_mm_part resolves it. */
  private static String[] partType(Map<?, ?> p) {
    Object type = p.get("type");
    Object uuid = p.get("uuid");
    if (type instanceof String t && (TEXT_PARTS.contains(t) || MEDIA_MODALITY.containsKey(t)
        || t.equals("tool_reference") || t.equals("prompt_embeds")) && uuid == null) {
      return new String[] {t, null};
    }
    if (type == null || uuid != null) {
      for (String k : UNTYPED_MEDIA_KEYS) {
        if (p.containsKey(k) && !(k.equals("input_audio") && p.get(k) == null)) {
          return new String[] {k, "untyped"};
        }
      }
      throw new ChatInputException("Missing 'type' field in multimodal part.");
    }
    if (!(type instanceof String t)) {
      throw new ChatInputException("Invalid 'type' field in multimodal part.");
    }
    return new String[] {t, null};
  }

  private static Object partValue(Map<?, ?> p, String type, boolean untyped) {
    return switch (type) {
      case "text", "input_text", "output_text" -> p.get("text");
      case "thinking" -> p.get("thinking");
      case "refusal" -> p.get("refusal");
      case "tool_reference" -> untyped ? p.get("tool_reference") : p.get("name");
      default -> p; // media: only its presence matters to the template
    };
  }

  /**
   * Every key some content-part type declares (vLLM's {@code _KNOWN_CONTENT_PART_FIELDS}: the keys of the OpenAI
   * text, image, input-audio and file parts and of vLLM's own part types).
   */
  private static final Set<String> DECLARED_PART_KEYS = Set.of("type", "text", "image_url", "input_audio", "file",
      "audio_url", "video_url", "refusal", "image_pil", "uuid", "image_embeds", "audio_embeds", "video_embeds",
      "data", "name", "thinking", "closed");

  /**
   * vLLM's {@code result.update(_collect_extra_fields(part))}: the part's undeclared keys (Anthropic-style
   * {@code cache_control}, ...) follow on the dict an "openai"-format template sees, in the part's order.
   */
  private static Map<String, Object> withUndeclaredKeys(Map<String, Object> parsed, Map<?, ?> part) {
    part.forEach((k, v) -> {
      if (!DECLARED_PART_KEYS.contains(k)) {
        parsed.put(String.valueOf(k), v);
      }
    });
    return parsed;
  }

  private static Map<String, Object> textPart(String s) {
    return orderedMap("type", "text", "text", s);
  }

  private static Map<String, Object> orderedMap(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  /**
   * {@code _postprocess_messages} (vLLM 0.33.0): an empty tool_calls list is dropped; every entry must
   * be an object of type "function" (the default) with a "function" object; its arguments always end
   * up an object: a dict is kept, a non-empty string is parsed with json.loads rules and kept only
   * when it decodes to an object (invalid JSON or any other value gives {}), anything else is {}.
   */
  @SuppressWarnings("unchecked")
  private static void postprocess(List<Map<String, Object>> messages) {
    for (Map<String, Object> m : messages) {
      if (!"assistant".equals(m.get("role")) || !m.containsKey("tool_calls")) {
        continue;
      }
      if (!(m.get("tool_calls") instanceof List<?> calls)) {
        continue;
      }
      if (calls.isEmpty()) {
        m.remove("tool_calls");
        continue;
      }
      for (Object item : calls) {
        if (!(item instanceof Map<?, ?> call)) {
          throw new ChatInputException("assistant tool_calls entries must be objects.");
        }
        Object type = call.containsKey("type") ? call.get("type") : "function";
        if (!"function".equals(type) || !(call.get("function") instanceof Map<?, ?> fn)) {
          throw new ChatInputException("chat completions only support assistant tool_calls of type 'function'.");
        }
        Map<String, Object> function = (Map<String, Object>) fn;
        Object args = function.get("arguments");
        Object parsed = args instanceof Map ? args
            : args instanceof String s && !s.isEmpty() ? parseJsonOrEmpty(s) : null;
        function.put("arguments", parsed instanceof Map ? parsed : new LinkedHashMap<>());
      }
    }
  }

  /**
   * Python's {@code json.loads(s)}, or {} where it raises JSONDecodeError. Where it raises anything
   * else (RecursionError, ValueError for an int of more than 4300 digits) the request fails in
   * vLLM: {@link ChatInputException}.
   */
  static Object parseJsonOrEmpty(String s) {
    try (JsonParser p = PY_JSON.createParser(s)) {
      JsonToken t = p.nextToken();
      if (t == null) {
        return new LinkedHashMap<>();
      }
      Object v = pyJsonValue(p, t, 1);
      return p.nextToken() == null ? v : new LinkedHashMap<>();
    } catch (JsonProcessingException | NotPythonJson e) {
      return new LinkedHashMap<>();
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /** Signals JSON Jackson reads but Python's json module rejects. */
  private static final class NotPythonJson extends RuntimeException {
    private static final long serialVersionUID = 1L;

    NotPythonJson() {
      super(null, null, false, false);
    }
  }

  private static Object pyJsonValue(JsonParser p, JsonToken t, int depth) throws java.io.IOException {
    switch (t) {
      case START_OBJECT -> {
        checkDepth(depth);
        Map<String, Object> m = new LinkedHashMap<>();
        for (JsonToken k = p.nextToken(); k == JsonToken.FIELD_NAME; k = p.nextToken()) {
          String name = p.currentName();
          m.put(name, pyJsonValue(p, p.nextToken(), depth + 1));
        }
        return m;
      }
      case START_ARRAY -> {
        checkDepth(depth);
        List<Object> l = new ArrayList<>();
        for (JsonToken v = p.nextToken(); v != JsonToken.END_ARRAY; v = p.nextToken()) {
          l.add(pyJsonValue(p, v, depth + 1));
        }
        return l;
      }
      case VALUE_STRING -> {
        return p.getText();
      }
      case VALUE_NUMBER_INT -> {
        int digits = p.getTextLength() - (p.getTextCharacters()[p.getTextOffset()] == '-' ? 1 : 0);
        if (digits > MAX_INT_DIGITS) {
          throw new ChatInputException("Exceeds the limit (4300 digits) for integer string conversion: value has "
              + digits + " digits");
        }
        return p.getNumberValue();
      }
      case VALUE_NUMBER_FLOAT -> {
        String text = p.getText();
        if ((text.indexOf('N') >= 0 || text.indexOf('I') >= 0)
            && !text.equals("NaN") && !text.equals("Infinity") && !text.equals("-Infinity")) {
          // Jackson also reads +Infinity, INF, +INF and -INF; Python's json only these three
          throw new NotPythonJson();
        }
        return p.getDoubleValue();
      }
      case VALUE_TRUE -> {
        return true;
      }
      case VALUE_FALSE -> {
        return false;
      }
      case VALUE_NULL -> {
        return null;
      }
      default -> throw new NotPythonJson();
    }
  }

  private static void checkDepth(int depth) {
    if (depth > MAX_JSON_DEPTH) {
      throw new ChatInputException("RecursionError", "maximum recursion depth exceeded while decoding a JSON value");
    }
  }

  @SuppressWarnings("unchecked")
  private static List<Object> deepCopy(List<?> l) {
    List<Object> out = new ArrayList<>(l.size());
    for (Object x : l) {
      if (x instanceof Map<?, ?> m) {
        Map<String, Object> c = new LinkedHashMap<>();
        m.forEach((k, v) -> c.put(String.valueOf(k), v instanceof Map || v instanceof List ? deepCopyValue(v) : v));
        out.add(c);
      } else {
        out.add(x);
      }
    }
    return out;
  }

  private static Object deepCopyValue(Object v) {
    if (v instanceof Map<?, ?> m) {
      Map<String, Object> c = new LinkedHashMap<>();
      m.forEach((k, x) -> c.put(String.valueOf(k), deepCopyValue(x)));
      return c;
    }
    if (v instanceof List<?> l) {
      List<Object> c = new ArrayList<>(l.size());
      l.forEach(x -> c.add(deepCopyValue(x)));
      return c;
    }
    return v;
  }

  /**
   * The tool dicts vLLM passes to the template: each request tool through pydantic's
   * {@code ChatCompletionToolsParam.model_dump()}, i.e. {@code type} then {@code function} with
   * {@code name}, {@code description} and {@code parameters} always present (null when absent),
   * followed by any extra keys in request order.
   */
  public static List<Map<String, Object>> toolDicts(List<? extends Map<String, ?>> tools) {
    if (tools == null) {
      return null;
    }
    List<Map<String, Object>> out = new ArrayList<>(tools.size());
    for (Map<String, ?> t : tools) {
      Object type = t.containsKey("type") ? t.get("type") : "function";
      if (!"function".equals(type)) {
        throw new ChatInputException("tool type must be 'function'");
      }
      if (!(t.get("function") instanceof Map<?, ?> fn) || !(fn.get("name") instanceof String)) {
        throw new ChatInputException("every tool needs a function with a string name");
      }
      Map<String, Object> function = new LinkedHashMap<>();
      function.put("name", fn.get("name"));
      function.put("description", fn.get("description"));
      function.put("parameters", fn.get("parameters") == null ? null : deepCopyValue(fn.get("parameters")));
      fn.forEach((k, v) -> {
        if (!function.containsKey(String.valueOf(k))) {
          function.put(String.valueOf(k), deepCopyValue(v));
        }
      });
      Map<String, Object> tool = new LinkedHashMap<>();
      tool.put("type", "function");
      tool.put("function", function);
      t.forEach((k, v) -> {
        if (!tool.containsKey(k)) {
          tool.put(k, deepCopyValue(v));
        }
      });
      out.add(tool);
    }
    return out;
  }
}
