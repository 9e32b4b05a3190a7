package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.extproc.request.OpenAiError;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The Responses API's side of one {@code /v1/responses} answer, shaped as vLLM's non-Harmony path without a
 * reasoning or tool parser writes it: one assistant {@code message} item holding one {@code output_text} part.
 *
 * <p>Not streamed: the response object of {@code responses_full_generator} ({@code ResponsesResponse.from_request}
 * with {@code ResponseUsage}). Streamed ({@code responses_stream_generator}, {@code _convert_stream_to_sse_events}):
 * {@code event:}/{@code data:} pairs numbered by {@code sequence_number} from 0, {@code response.created} and
 * {@code response.in_progress} as soon as the request is in the engine (vLLM yields both before it reads the first
 * output), then {@code response.output_item.added} and {@code response.content_part.added} with the first token,
 * one {@code response.output_text.delta} per token, the three {@code ...done} events and {@code response.completed}
 * carrying the whole response with its usage. No {@code [DONE]}. An output cut by {@code max_output_tokens} is
 * {@code status: "incomplete"} with {@code incomplete_details.reason: "max_output_tokens"}, under the same
 * {@code response.completed} event, as vLLM reports it. One item id serves the stream and the final object (vLLM
 * draws a second one for the latter; nothing reads the difference).
 *
 * <p>Used by one {@link ResponseStream}'s drains, which are serialized; not thread-safe.
 */
final class ResponsesEvents {

  private static final ObjectMapper JSON = new ObjectMapper();

  private final ObjectNode template;
  private final String itemId;
  private final StringBuilder text = new StringBuilder();
  private int sequence;
  private boolean itemAdded;

  /**
   * @param template the request's response fields ({@link ApiRequest#response()}), not modified
   * @param createdAt the response's {@code created_at}, in seconds
   */
  ResponsesEvents(ObjectNode template, long createdAt) {
    this.template = template.deepCopy();
    this.template.put("created_at", createdAt);
    HexFormat hex = HexFormat.of();
    ThreadLocalRandom r = ThreadLocalRandom.current();
    this.itemId = "msg_" + hex.toHexDigits(r.nextLong()) + hex.toHexDigits(r.nextLong());
  }

  /** {@code response.created} and {@code response.in_progress}. */
  void started(OutputStream out) throws IOException {
    ObjectNode e = JSON.createObjectNode();
    e.set("response", template.deepCopy());
    send(out, "response.created", e);
    e = JSON.createObjectNode();
    e.set("response", template.deepCopy());
    send(out, "response.in_progress", e);
  }

  /** One generated token's text; the message item and its part open with the first. */
  void delta(OutputStream out, String delta) throws IOException {
    if (!itemAdded) {
      itemAdded = true;
      ObjectNode e = JSON.createObjectNode();
      e.put("output_index", 0);
      e.set("item", message("in_progress", null));
      send(out, "response.output_item.added", e);
      e = part();
      e.set("part", outputText(""));
      send(out, "response.content_part.added", e);
    }
    text.append(delta);
    ObjectNode e = part();
    e.put("delta", delta);
    e.putArray("logprobs");
    send(out, "response.output_text.delta", e);
  }

  /** The non-streamed answer: the response object with {@code output}, its text gathered here. */
  byte[] response(String output, boolean cutByLength, long promptTokens, long completionTokens, long cachedTokens)
      throws IOException {
    text.setLength(0);
    text.append(output);
    return JSON.writeValueAsBytes(finished(cutByLength, promptTokens, completionTokens, cachedTokens));
  }

  /** The closing events of a stream: the three {@code ...done} events, then {@code response.completed}. */
  void completed(OutputStream out, boolean cutByLength, long promptTokens, long completionTokens, long cachedTokens)
      throws IOException {
    String all = text.toString();
    ObjectNode e = part();
    e.put("text", all);
    e.putArray("logprobs");
    send(out, "response.output_text.done", e);
    e = part();
    e.set("part", outputText(all));
    send(out, "response.content_part.done", e);
    e = JSON.createObjectNode();
    e.put("output_index", 0);
    e.set("item", message("completed", all));
    send(out, "response.output_item.done", e);
    e = JSON.createObjectNode();
    e.set("response", finished(cutByLength, promptTokens, completionTokens, cachedTokens));
    send(out, "response.completed", e);
  }

  /** A failure after the headers: an {@code error} event, as vLLM streams a generation error. */
  void error(OutputStream out, OpenAiError error) throws IOException {
    ObjectNode e = JSON.createObjectNode();
    e.put("code", error.code());
    e.put("message", error.message());
    if (error.param() == null) {
      e.putNull("param");
    } else {
      e.put("param", error.param());
    }
    send(out, "error", e);
  }

  private ObjectNode finished(boolean cutByLength, long promptTokens, long completionTokens, long cachedTokens) {
    ObjectNode r = template.deepCopy();
    if (cutByLength) {
      r.putObject("incomplete_details").put("reason", "max_output_tokens");
    }
    ((ArrayNode) r.get("output")).add(message("completed", text.toString()));
    r.put("status", cutByLength ? "incomplete" : "completed");
    ObjectNode u = r.putObject("usage");
    u.put("input_tokens", promptTokens);
    u.putObject("input_tokens_details").put("cached_tokens", cachedTokens);
    u.put("output_tokens", completionTokens);
    u.putObject("output_tokens_details").put("reasoning_tokens", 0);
    u.put("total_tokens", promptTokens + completionTokens);
    return r;
  }

  /** The message item; {@code content} null while it is being streamed (an empty part list). */
  private ObjectNode message(String status, String content) {
    ObjectNode m = JSON.createObjectNode();
    m.put("id", itemId);
    ArrayNode parts = m.putArray("content");
    if (content != null) {
      parts.add(outputText(content));
    }
    m.put("role", "assistant");
    m.put("status", status);
    m.put("type", "message");
    return m;
  }

  private static ObjectNode outputText(String s) {
    ObjectNode p = JSON.createObjectNode();
    p.putArray("annotations");
    p.put("text", s);
    p.put("type", "output_text");
    return p;
  }

  /** The fields every part-level event carries. */
  private ObjectNode part() {
    ObjectNode e = JSON.createObjectNode();
    e.put("content_index", 0);
    e.put("item_id", itemId);
    e.put("output_index", 0);
    return e;
  }

  private void send(OutputStream out, String type, ObjectNode event) throws IOException {
    event.put("sequence_number", sequence++);
    event.put("type", type);
    out.write(("event: " + type + "\ndata: ").getBytes(StandardCharsets.US_ASCII));
    out.write(JSON.writeValueAsBytes(event));
    out.write(SSE_END);
  }

  private static final byte[] SSE_END = "\n\n".getBytes(StandardCharsets.US_ASCII);
}
