package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.workload.ToolCallAnswer;
import dev.kvrouter.extproc.request.ErrorShape;
import dev.kvrouter.extproc.request.OpenAiError;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

/**
 * The Anthropic Messages API's side of one {@code /v1/messages} answer, shaped as vLLM's
 * {@code AnthropicServingMessages} converts its chat answer: a {@code thinking} block for a scripted answer's think
 * block (what vLLM's reasoning parser splits off), one {@code text} content block, then, for a scripted tool-call answer ({@link ToolCallScript}), its calls as {@code tool_use} blocks as the
 * converter turns a tool parser's {@code tool_calls} into them ({@code stop_reason: "tool_use"}).
 *
 * <p>Not streamed: {@code messages_full_converter}'s message (serialized without its null fields). Streamed
 * ({@code message_stream_converter} over a chat stream with continuous usage): {@code event:}/{@code data:} pairs,
 * {@code message_start} with the first generated token (vLLM builds it from the chat stream's first chunk, which
 * waits for the engine's first output; its usage is that chunk's, the whole prompt as input and no cache fields),
 * {@code content_block_start} and one {@code content_block_delta} per token, then {@code content_block_stop},
 * {@code message_delta} with the stop reason and the final usage, and {@code message_stop}. The usage is
 * {@code _build_anthropic_usage}'s: {@code input_tokens} without the cached part, which is
 * {@code cache_read_input_tokens} (this worker always reports cached tokens, as vLLM with prompt token details).
 *
 * <p>Used by one {@link ResponseStream}'s drains, which are serialized; not thread-safe.
 */
final class MessagesEvents {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final byte[] SSE_END = "\n\n".getBytes(StandardCharsets.US_ASCII);

  private final String id;
  private final String model;
  private final long promptTokens;
  private boolean started;
  /** The open block's type ("thinking" or "text"), or null. */
  private String open;
  /** The index the next block opens at. */
  private int blocks;

  /**
   * @param id the message id (vLLM's is its chat completion's)
   * @param promptTokens the prompt's length, which {@code message_start} reports before the engine's outcome
   */
  MessagesEvents(String id, String model, long promptTokens) {
    this.id = id;
    this.model = model;
    this.promptTokens = promptTokens;
  }

  /**
   * One generated token's text; {@code message_start} goes out with the first token, a block opens with the first
   * text of its kind (a {@code thinking} block for the think block's words, as vLLM's converter turns the reasoning
   * parser's deltas into {@code thinking_delta}s, then a {@code text} block). A token without text (a tool call's,
   * which vLLM's tool parser withholds) writes no delta, as vLLM's converter skips empty content.
   */
  void delta(OutputStream out, String delta, boolean reasoning) throws IOException {
    if (!started) {
      started = true;
      sendMessageStart(out);
    }
    if (delta.isEmpty()) {
      return;
    }
    String type = reasoning ? "thinking" : "text";
    if (!type.equals(open)) {
      closeBlock(out);
      open = type;
      ObjectNode e = event("content_block_start");
      e.put("index", blocks);
      e.putObject("content_block").put("type", type).put(type, "");
      send(out, e);
    }
    ObjectNode e = event("content_block_delta");
    e.put("index", blocks);
    e.putObject("delta").put("type", type + "_delta").put(type, delta);
    send(out, e);
  }

  /**
   * Closes the open block: a thinking block gets its {@code signature_delta} first (vLLM's converter signs it with
   * a random hex uuid, which no client can check).
   */
  private void closeBlock(OutputStream out) throws IOException {
    if (open == null) {
      return;
    }
    if (open.equals("thinking")) {
      ObjectNode e = event("content_block_delta");
      e.put("index", blocks);
      e.putObject("delta").put("type", "signature_delta").put("signature", signature());
      send(out, e);
    }
    ObjectNode e = event("content_block_stop");
    e.put("index", blocks++);
    send(out, e);
    open = null;
  }

  private static String signature() {
    return java.util.UUID.randomUUID().toString().replace("-", "");
  }

  /**
   * The non-streamed answer ({@code messages_full_converter}): the text block when there is text, then a
   * {@code tool_use} block per call.
   *
   * @param calls the answer's tool calls, or null when it has none or they were cut off
   */
  byte[] response(String reasoning, String text, boolean cutByLength, List<ToolCallAnswer.Call> calls, long prompt,
      long completion, long cached) throws IOException {
    ObjectNode m = message(stopReason(cutByLength, calls), usage(prompt, completion, cached));
    ArrayNode content = (ArrayNode) m.get("content");
    if (!reasoning.isEmpty()) {
      content.addObject().put("type", "thinking").put("thinking", reasoning).put("signature", signature());
    }
    if (!text.isEmpty() || (calls == null && reasoning.isEmpty())) {
      content.addObject().put("type", "text").put("text", text);
    }
    for (ToolCallAnswer.Call c : calls == null ? List.<ToolCallAnswer.Call>of() : calls) {
      content.add(toolUse(c, c.input()));
    }
    m.remove("stop_sequence"); // None, which the non-streamed answer leaves out
    return JSON.writeValueAsBytes(m);
  }

  /**
   * The closing events of a stream: the open text block's stop, then each tool call as vLLM's converter streams one
   * its tool parser extracted ({@code content_block_start} with the {@code tool_use} block and empty {@code input},
   * one {@code input_json_delta} with the arguments, {@code content_block_stop}), the stop reason and final usage.
   *
   * @param calls the answer's tool calls, or null when it has none or they were cut off
   */
  void completed(OutputStream out, boolean cutByLength, List<ToolCallAnswer.Call> calls, long prompt,
      long completion, long cached) throws IOException {
    if (!started) {
      // no token: vLLM's first chunk still made the message, and no block was opened
      started = true;
      sendMessageStart(out);
    }
    closeBlock(out);
    int index = blocks;
    for (ToolCallAnswer.Call c : calls == null ? List.<ToolCallAnswer.Call>of() : calls) {
      ObjectNode start = event("content_block_start");
      start.put("index", index);
      start.set("content_block", toolUse(c, Map.of()));
      send(out, start);
      ObjectNode delta = event("content_block_delta");
      delta.put("index", index);
      delta.putObject("delta").put("type", "input_json_delta").put("partial_json", JSON.writeValueAsString(c.input()));
      send(out, delta);
      ObjectNode stop = event("content_block_stop");
      stop.put("index", index++);
      send(out, stop);
    }
    ObjectNode e = event("message_delta");
    e.putObject("delta").put("stop_reason", stopReason(cutByLength, calls)).putNull("stop_sequence");
    e.set("usage", usage(prompt, completion, cached));
    send(out, e);
    send(out, event("message_stop"));
  }

  /** vLLM's {@code stop_reason_map} of the chat finish reason ({@code length}, {@code tool_calls}, {@code stop}). */
  private static String stopReason(boolean cutByLength, List<ToolCallAnswer.Call> calls) {
    return cutByLength ? "max_tokens" : calls != null ? "tool_use" : "end_turn";
  }

  private static ObjectNode toolUse(ToolCallAnswer.Call c, Map<String, Object> input) {
    ObjectNode b = JSON.createObjectNode().put("type", "tool_use").put("id", c.id()).put("name", c.name());
    b.set("input", JSON.valueToTree(input));
    return b;
  }

  /** A failure after the headers: an {@code error} event, as vLLM's converter reports a chat stream's error. */
  void error(OutputStream out, OpenAiError error) throws IOException {
    ObjectNode e = event("error");
    e.putObject("error").put("type", "internal_error").put("message", error.message());
    send(out, e);
  }

  /**
   * {@code translate_error_response}: an error before the headers, {@code {"type": "error", "error": ...}} with the
   * inner type vLLM writes for its status ({@code NotFoundError}, {@code internal_error}, ...), the router's own
   * {@link ErrorShape#ANTHROPIC}, so a refusal reads the same whichever of the two made it.
   */
  static byte[] errorBody(OpenAiError error) {
    return ErrorShape.ANTHROPIC.body(error).getBytes(StandardCharsets.UTF_8);
  }

  private void sendMessageStart(OutputStream out) throws IOException {
    ObjectNode u = JSON.createObjectNode();
    u.put("input_tokens", promptTokens);
    u.put("output_tokens", 0);
    ObjectNode e = event("message_start");
    e.set("message", message(null, u));
    send(out, e);
  }

  /** The message in the field order of vLLM's {@code AnthropicMessagesResponse}, its content empty. */
  private ObjectNode message(String stopReason, ObjectNode usage) {
    ObjectNode m = JSON.createObjectNode();
    m.put("id", id);
    m.put("type", "message");
    m.put("role", "assistant");
    m.putArray("content");
    m.put("model", model);
    m.put("stop_reason", stopReason);
    m.putNull("stop_sequence");
    m.set("usage", usage);
    return m;
  }

  /** {@code _build_anthropic_usage} of the chat usage; the engine creates no cache entries it reports. */
  private static ObjectNode usage(long prompt, long completion, long cached) {
    ObjectNode u = JSON.createObjectNode();
    u.put("input_tokens", Math.max(0, prompt - cached));
    u.put("output_tokens", completion);
    u.put("cache_read_input_tokens", cached);
    return u;
  }

  private static ObjectNode event(String type) {
    return JSON.createObjectNode().put("type", type);
  }

  private static void send(OutputStream out, ObjectNode event) throws IOException {
    out.write(("event: " + event.get("type").asText() + "\ndata: ").getBytes(StandardCharsets.US_ASCII));
    out.write(JSON.writeValueAsBytes(event));
    out.write(SSE_END);
  }
}
