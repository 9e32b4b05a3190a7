package dev.kvrouter.extproc.request;

import dev.kvrouter.extproc.request.RequestBodyParser.BadRequest;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * {@code tools} and {@code tool_choice} as vLLM prepares them for the chat template: its
 * {@code check_tool_usage} defaults and checks on the raw values, then {@code tool.model_dump()} of each
 * {@code ChatCompletionToolsParam} (declared fields first, absent optional ones as null, then the extra keys the
 * client sent, in order), which decides the exact text a template's {@code tools | tojson} produces. Verified
 * against pydantic by {@code scripts/fixtures/request_semantics.py}.
 */
final class Tools {

  record Normalized(List<Map<String, Object>> tools, Object toolChoice) {}

  private Tools() {}

  static Normalized normalize(Object tools, boolean choicePresent, Object choice) throws BadRequest {
    if (!choicePresent && PythonValues.truthy(tools)) {
      choicePresent = true;
      choice = "auto";
    }
    if (choicePresent && choice != null && !"none".equals(choice)) {
      if (tools == null) {
        throw RequestBodyParser.bad("When using `tool_choice`, `tools` must be set.", "tool_choice");
      }
      if (!"auto".equals(choice) && !"required".equals(choice) && !(choice instanceof Map)) {
        throw RequestBodyParser.bad("Invalid value for `tool_choice`: only named tools, \"none\", \"auto\" or "
            + "\"required\" are supported.", "tool_choice");
      }
      if ("required".equals(choice) && tools instanceof List<?> l && l.isEmpty()) {
        return new Normalized(null, "none"); // OpenAI's behaviour, as vLLM implements it
      }
    }
    List<Map<String, Object>> dumped = dump(tools);
    if (choice instanceof Map<?, ?> named) {
      checkNamed(named, dumped);
    }
    return new Normalized(dumped, choice);
  }

  /**
   * A Responses request's {@code tools} and {@code tool_choice} as vLLM renders them: {@code check_tool_usage}
   * (responses/protocol.py) defaults the choice to "none" without tools and refuses a required or named choice it
   * cannot meet; {@code construct_tool_dicts} (responses/utils.py) keeps the function tools, namespaced ones
   * flattened to {@code namespace__name} ({@code iter_response_function_tool_dicts}), and
   * {@code convert_tool_responses_to_completions_format} turns each {@code FunctionTool.model_dump()} into a chat
   * tool's dump. Other tool types (web search, MCP, ...) never reach the template. A choice of "none" stays in
   * {@link Normalized#toolChoice()} so the renderer's {@code --exclude-tools-when-tool-choice-none} applies.
   *
   * <p>The dump's keys follow the openai SDK's models ({@code FunctionTool}: name, parameters, strict, type,
   * defer_loading, description; {@code NamespaceTool}'s {@code ToolFunction}: name, type, defer_loading, description,
   * parameters, strict), then the client's extra keys, as vLLM's pydantic models keep them.
   */
  static Normalized responses(Object tools, Object choice) throws BadRequest {
    boolean option = "none".equals(choice) || "auto".equals(choice) || "required".equals(choice);
    if (!option && !(choice instanceof Map<?, ?> c && c.get("type") instanceof String)) {
      // pydantic refuses it before check_tool_usage runs; the template would otherwise see a choice vLLM never does
      throw RequestBodyParser.bad("`tool_choice` must be \"none\", \"auto\", \"required\" or an object with a "
          + "string `type`", "tool_choice");
    }
    if (tools == null) {
      tools = List.of(); // vLLM: tools default to an empty list
    }
    if (!(tools instanceof List<?> list)) {
      throw RequestBodyParser.bad("`tools` must be a list", "tools");
    }
    boolean named = choice instanceof Map<?, ?> m && "function".equals(m.get("type"));
    String notFound = "Tool choice 'function' not found in 'tools' parameter.";
    if (list.isEmpty()) {
      if ("required".equals(choice)) {
        throw RequestBodyParser.bad("Tool choice 'required' must be specified with 'tools' parameter.",
            "tool_choice");
      }
      if (named) {
        throw RequestBodyParser.bad(notFound, "tool_choice");
      }
      return new Normalized(null, "none");
    }
    List<Map<String, Object>> out = new ArrayList<>();
    List<Object> names = new ArrayList<>();
    for (int i = 0; i < list.size(); i++) {
      String at = "tools[" + i + "]";
      if (!(list.get(i) instanceof Map<?, ?> tool) || !(tool.get("type") instanceof String type)) {
        throw RequestBodyParser.bad("`" + at + "` must be an object with a string `type`", at);
      }
      if (!type.equals("namespace")) {
        names.add(tool.get("name")); // check_tool_usage: any tool's name, a custom tool's too
      }
      if (type.equals("function")) {
        out.add(chatTool(tool, at, null));
      } else if (type.equals("namespace")) {
        if (!(tool.get("name") instanceof String ns) || !(tool.get("description") instanceof String)
            || !(tool.get("tools") instanceof List<?> inner)) {
          throw RequestBodyParser.bad("`" + at + "` must have a string `name` and `description` and a list of `tools`",
              at);
        }
        for (int j = 0; j < inner.size(); j++) {
          String in = at + ".tools[" + j + "]";
          if (!(inner.get(j) instanceof Map<?, ?> fn) || !(fn.get("type") instanceof String)) {
            throw RequestBodyParser.bad("`" + in + "` must be an object with a string `type`", in);
          }
          names.add(fn.get("name"));
          names.add(ns + ResponsesInput.NAMESPACE_SEPARATOR + fn.get("name"));
          if ("function".equals(fn.get("type"))) {
            out.add(chatTool(fn, in, ns));
          }
        }
      }
    }
    if (named && !(((Map<?, ?>) choice).get("name") instanceof String n && !n.isEmpty() && names.contains(n))) {
      throw RequestBodyParser.bad(notFound, "tool_choice");
    }
    return new Normalized(Collections.unmodifiableList(out), choice);
  }

  /**
   * An Anthropic Messages request's {@code tools} and {@code tool_choice} as vLLM's {@code _convert_tools} and
   * {@code _convert_tool_choice} hand them to the chat path: each {@code AnthropicTool} (a name, an object
   * {@code input_schema} given {@code "type": "object"} when it has no type) becomes a chat function tool with
   * {@code name, description, parameters}, and {@code strict} and {@code defer_loading} when set (vLLM main's dump);
   * {@code auto}, {@code any}, {@code none} and
   * {@code tool} become "auto", "required", "none" and a named function, and tools without a choice get "auto". The
   * chat request's own tool checks are not run (vLLM assigns both after building it).
   */
  static Normalized messages(Object tools, Object choice) throws BadRequest {
    Object chatChoice = null;
    if (choice != null) {
      if (!(choice instanceof Map<?, ?> c) || !(c.get("type") instanceof String type)
          || !Set.of("auto", "any", "tool", "none").contains(type)) {
        throw RequestBodyParser.bad("`tool_choice.type` must be one of auto, any, tool, none", "tool_choice.type");
      }
      if (c.get("name") != null && !(c.get("name") instanceof String)) {
        throw RequestBodyParser.bad("`tool_choice.name` must be a string", "tool_choice.name");
      }
      laxBoolOrNull(c.get("disable_parallel_tool_use"), "tool_choice.disable_parallel_tool_use");
      if (type.equals("tool")) {
        if (!(c.get("name") instanceof String name) || name.isEmpty()) {
          throw RequestBodyParser.bad("tool_choice.name is required when type is 'tool'", "tool_choice.name");
        }
        chatChoice = Map.of("type", "function", "function", Map.of("name", name));
      } else {
        chatChoice = type.equals("any") ? "required" : type;
      }
    }
    if (tools == null) {
      return new Normalized(null, chatChoice);
    }
    if (!(tools instanceof List<?> list)) {
      throw RequestBodyParser.bad("`tools` must be a list", "tools");
    }
    List<Map<String, Object>> chat = new ArrayList<>(list.size());
    for (int i = 0; i < list.size(); i++) {
      String at = "tools[" + i + "]";
      if (!(list.get(i) instanceof Map<?, ?> tool) || !(tool.get("name") instanceof String)) {
        throw RequestBodyParser.bad("`" + at + "` must be an object with a string `name`", at);
      }
      if (!(tool.get("input_schema") instanceof Map<?, ?> schema)) {
        throw RequestBodyParser.bad("`" + at + ".input_schema` must be an object", at + ".input_schema");
      }
      Map<String, Object> parameters = new LinkedHashMap<>();
      schema.forEach((k, v) -> parameters.put((String) k, v));
      if (!parameters.containsKey("type")) {
        parameters.put("type", "object"); // validate_input_schema: only a schema without the key; a null type stays
      }
      chat.add(functionTool(tool.get("name"), description(tool, at), Collections.unmodifiableMap(parameters),
          laxBoolOrNull(tool.get("strict"), at + ".strict"),
          laxBoolOrNull(tool.get("defer_loading"), at + ".defer_loading")));
    }
    return new Normalized(Collections.unmodifiableList(chat), chatChoice == null ? "auto" : chatChoice);
  }

  /** A tool's optional {@code description}: a string or absent. */
  private static String description(Map<?, ?> tool, String at) throws BadRequest {
    Object d = tool.get("description");
    if (d != null && !(d instanceof String)) {
      throw RequestBodyParser.bad("`" + at + ".description` must be a string", at + ".description");
    }
    return (String) d;
  }

  /** An SDK model's {@code Optional[bool]}: the dump holds what pydantic's lax bool made of the value. */
  private static Boolean laxBoolOrNull(Object v, String at) throws BadRequest {
    if (v == null) {
      return null;
    }
    Boolean b = PythonValues.laxBool(v);
    if (b == null) {
      throw RequestBodyParser.bad("`" + at + "` must be a boolean", at);
    }
    return b;
  }

  /**
   * One Responses function tool (a namespace's flattened to {@code namespace__name}) as the chat tool vLLM renders:
   * what {@link #functionTool} keeps of its SDK model's dump, {@code strict} and {@code defer_loading} as pydantic's
   * lax bool read them.
   */
  private static Map<String, Object> chatTool(Map<?, ?> tool, String at, String namespace) throws BadRequest {
    if (!(tool.get("name") instanceof String name)) {
      throw RequestBodyParser.bad("`" + at + ".name` must be a string", at + ".name");
    }
    Object description = description(tool, at);
    Object parameters = tool.get("parameters");
    if (parameters != null && !(parameters instanceof Map)) {
      throw RequestBodyParser.bad("`" + at + ".parameters` must be an object", at + ".parameters");
    }
    String flat = namespace == null ? name : namespace + ResponsesInput.NAMESPACE_SEPARATOR + name;
    return functionTool(flat, description, parameters, laxBoolOrNull(tool.get("strict"), at + ".strict"),
        laxBoolOrNull(tool.get("defer_loading"), at + ".defer_loading"));
  }


  /**
   * A chat function tool as vLLM main's {@code FunctionDefinition} dumps it (generate/base/protocol.py, which both its
   * Responses and its Anthropic conversions validate their tools into): name, description and parameters, then
   * {@code strict} and {@code defer_loading} only when set; any other key dropped. The chat path of 0.33.0
   * ({@link #dump}) kept every key, nulls included.
   */
  private static Map<String, Object> functionTool(Object name, Object description, Object parameters,
      Boolean strict, Boolean deferLoading) {
    Map<String, Object> f = new LinkedHashMap<>();
    f.put("name", name);
    f.put("description", description);
    f.put("parameters", parameters);
    if (strict != null) {
      f.put("strict", strict);
    }
    if (deferLoading != null) {
      f.put("defer_loading", deferLoading);
    }
    Map<String, Object> t = new LinkedHashMap<>();
    t.put("type", "function");
    t.put("function", Collections.unmodifiableMap(f));
    return Collections.unmodifiableMap(t);
  }

  private static void checkNamed(Map<?, ?> choice, List<Map<String, Object>> tools) throws BadRequest {
    String usage = "Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`";
    if (!(choice.get("function") instanceof Map<?, ?> fn)) {
      throw RequestBodyParser.bad("Invalid value for `function` in `tool_choice`. " + usage, "tool_choice");
    }
    if (!(fn.get("name") instanceof String name) || name.isEmpty()) {
      throw RequestBodyParser.bad("Expected a non-empty `name` in `function` in `tool_choice`. " + usage,
          "tool_choice");
    }
    for (Map<String, Object> t : tools) {
      if (name.equals(((Map<?, ?>) t.get("function")).get("name"))) {
        return;
      }
    }
    throw RequestBodyParser.bad("The tool specified in `tool_choice` does not match any of the specified `tools`",
        "tool_choice");
  }

  private static List<Map<String, Object>> dump(Object tools) throws BadRequest {
    if (tools == null) {
      return null;
    }
    if (!(tools instanceof List<?> list)) {
      throw RequestBodyParser.bad("`tools` must be a list", "tools");
    }
    List<Map<String, Object>> out = new ArrayList<>(list.size());
    for (int i = 0; i < list.size(); i++) {
      String at = "tools[" + i + "]";
      if (!(list.get(i) instanceof Map<?, ?> tool)) {
        throw RequestBodyParser.bad("`" + at + "` must be an object", at);
      }
      if (tool.containsKey("type") && !"function".equals(tool.get("type"))) {
        throw RequestBodyParser.bad("`" + at + ".type` must be \"function\"", at + ".type");
      }
      if (!(tool.get("function") instanceof Map<?, ?> fn)) {
        throw RequestBodyParser.bad("`" + at + ".function` must be an object", at + ".function");
      }
      if (!(fn.get("name") instanceof String)) {
        throw RequestBodyParser.bad("`" + at + ".function.name` must be a string", at + ".function.name");
      }
      Object description = description(fn, at + ".function");
      Object parameters = fn.get("parameters");
      if (parameters != null && !(parameters instanceof Map)) {
        throw RequestBodyParser.bad("`" + at + ".function.parameters` must be an object",
            at + ".function.parameters");
      }
      Map<String, Object> f = new LinkedHashMap<>();
      f.put("name", fn.get("name"));
      f.put("description", description);
      f.put("parameters", parameters);
      extras(fn, f, "name", "description", "parameters");
      Map<String, Object> t = new LinkedHashMap<>();
      t.put("type", "function");
      t.put("function", Collections.unmodifiableMap(f));
      extras(tool, t, "type", "function");
      out.add(Collections.unmodifiableMap(t));
    }
    return Collections.unmodifiableList(out);
  }

  private static void extras(Map<?, ?> from, Map<String, Object> to, String... declared) {
    outer:
    for (Map.Entry<?, ?> e : from.entrySet()) {
      for (String d : declared) {
        if (d.equals(e.getKey())) {
          continue outer;
        }
      }
      to.put((String) e.getKey(), e.getValue());
    }
  }
}
