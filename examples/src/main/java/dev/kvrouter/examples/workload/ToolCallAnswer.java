package dev.kvrouter.examples.workload;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * An answer a client scripts for a simulated worker: text, then tool calls, as a coding agent's model answers
 * ({@code multi-turn:format=messages}), or a reasoning model's chat answer, its thinking then its text and no call
 * ({@code multi-turn:format=chat,reasoning=N}). The worker generates the chat template's own rendering of that assistant
 * message, so the history the client resends renders to what the worker's KV cache holds.
 *
 * <p>It travels in {@code vllm_xargs} (vLLM's field for custom extensions, declared by its chat and Anthropic
 * request models, handed to the sampler untouched, so a real vLLM ignores it): {@value #TEXT} the text, and
 * {@value #TOOL_CALLS} a list of JSON strings {@code {"id", "name", "input"}} ({@code vllm_xargs} values are strings,
 * numbers or lists of them). {@value #REASONING}, optional, is a reasoning model's thinking before the answer: the worker
 * generates it (the template's think block) only when the request leaves thinking on as the template sees it.
 *
 * @param reasoning the thinking before the text ({@code ""} for none)
 * @param text the text before the calls ({@code ""} for none)
 * @param calls the tool calls, in order (none: the answer ends its turn after its text)
 */
public record ToolCallAnswer(String reasoning, String text, List<Call> calls) {

  /** The {@code vllm_xargs} key of the reasoning. */
  public static final String REASONING = "answer_reasoning";
  /** The {@code vllm_xargs} key of the text. */
  public static final String TEXT = "answer_text";
  /** The {@code vllm_xargs} key of the tool calls. */
  public static final String TOOL_CALLS = "answer_tool_calls";

  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * One tool call.
   *
   * @param id the {@code tool_use} id the answer carries (and the next turn's {@code tool_result} names)
   * @param name the tool's name
   * @param input the call's arguments
   */
  public record Call(String id, String name, Map<String, Object> input) {
    public Call {
      Objects.requireNonNull(id, "id");
      Objects.requireNonNull(name, "name");
      input = Map.copyOf(input);
    }
  }

  public ToolCallAnswer {
    Objects.requireNonNull(reasoning, "reasoning");
    Objects.requireNonNull(text, "text");
    calls = List.copyOf(calls);
  }

  /** An answer without reasoning. */
  public ToolCallAnswer(String text, List<Call> calls) {
    this("", text, calls);
  }

  /** This answer with {@code reasoning} before it. */
  public ToolCallAnswer withReasoning(String reasoning) {
    return new ToolCallAnswer(reasoning, text, calls);
  }

  /**
   * The calls as a chat completion's {@code tool_calls}, as vLLM's tool parsers return them: {@code id},
   * {@code type: "function"}, {@code function: {name, arguments}}, the arguments the JSON string Python's
   * {@code json.dumps} writes ({@code ", "} and {@code ": "} separators, non-ASCII kept).
   */
  public ArrayNode chatToolCalls() {
    ArrayNode out = JSON.createArrayNode();
    for (Call c : calls) {
      ObjectNode call = out.addObject().put("id", c.id()).put("type", "function");
      call.putObject("function").put("name", c.name()).put("arguments", pythonJson(c.input()));
    }
    return out;
  }

  /** {@code json.dumps(value, ensure_ascii=False)} of a JSON-like value (maps, lists, strings, numbers, booleans). */
  static String pythonJson(Object value) {
    if (value instanceof Map<?, ?> m) {
      StringBuilder b = new StringBuilder("{");
      for (Map.Entry<?, ?> e : m.entrySet()) {
        b.append(b.length() > 1 ? ", " : "").append(pythonJson(String.valueOf(e.getKey()))).append(": ")
            .append(pythonJson(e.getValue()));
      }
      return b.append('}').toString();
    }
    if (value instanceof List<?> l) {
      StringBuilder b = new StringBuilder("[");
      for (Object o : l) {
        b.append(b.length() > 1 ? ", " : "").append(pythonJson(o));
      }
      return b.append(']').toString();
    }
    try {
      return JSON.writeValueAsString(value); // strings, numbers, booleans and null as JSON writes them
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("not a JSON value: " + value, e);
    }
  }

  /** Writes the two {@code vllm_xargs} fields into the object {@code g} is in. */
  public void writeXargs(JsonGenerator g) throws IOException {
    if (!reasoning.isEmpty()) {
      g.writeStringField(REASONING, reasoning);
    }
    g.writeStringField(TEXT, text);
    g.writeArrayFieldStart(TOOL_CALLS);
    for (Call c : calls) {
      ObjectNode o = JSON.createObjectNode().put("id", c.id()).put("name", c.name());
      o.set("input", JSON.valueToTree(c.input()));
      g.writeString(JSON.writeValueAsString(o));
    }
    g.writeEndArray();
  }

  /**
   * The answer {@code xargs} (a request's {@code vllm_xargs}) scripts, or null when it names none.
   *
   * @throws IllegalArgumentException when it names one badly
   */
  @SuppressWarnings("unchecked")
  public static ToolCallAnswer fromXargs(JsonNode xargs) {
    if (xargs == null || !xargs.isObject() || !xargs.has(TOOL_CALLS)) {
      return null;
    }
    JsonNode reasoning = xargs.path(REASONING);
    JsonNode text = xargs.path(TEXT);
    JsonNode list = xargs.get(TOOL_CALLS);
    if (!(text.isMissingNode() || text.isTextual()) || !(reasoning.isMissingNode() || reasoning.isTextual())
        || !list.isArray() || (list.isEmpty() && reasoning.isMissingNode())) {
      throw new IllegalArgumentException("`vllm_xargs." + TOOL_CALLS + "` must be a list of JSON strings (empty only "
          + "with `" + REASONING + "`) and `" + TEXT + "` and `" + REASONING + "` strings");
    }
    List<Call> calls = new ArrayList<>(list.size());
    for (JsonNode s : list) {
      JsonNode c;
      try {
        c = s.isTextual() ? JSON.readTree(s.asText()) : null;
      } catch (JsonProcessingException e) {
        c = null;
      }
      if (c == null || !c.path("id").isTextual() || !c.path("name").isTextual() || !c.path("input").isObject()) {
        throw new IllegalArgumentException("each `vllm_xargs." + TOOL_CALLS + "` entry must be a JSON object string "
            + "with `id` and `name` strings and an `input` object");
      }
      calls.add(new Call(c.get("id").asText(), c.get("name").asText(), JSON.convertValue(c.get("input"), Map.class)));
    }
    return new ToolCallAnswer(reasoning.asText(""), text.asText(""), calls);
  }
}
