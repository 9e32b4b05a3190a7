package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.sun.net.httpserver.HttpExchange;
import dev.kvrouter.examples.sim.engine.RequestFailure;
import dev.kvrouter.examples.sim.engine.RequestObserver;
import dev.kvrouter.examples.sim.engine.RequestOutcome;
import dev.kvrouter.examples.workload.ToolCallAnswer;
import dev.kvrouter.extproc.request.OpenAiError;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import java.util.function.LongConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Writes one HTTP response from engine output, without holding a thread while the engine works.
 *
 * <p>The engine thread only appends events to a lock-free inbox and schedules a drain; drains run on the shared
 * writer executor, at most one at a time per response (the {@code draining} flag hands the state from one drain
 * to the next with a happens-before edge), and do the blocking socket writes. A streaming response sends its
 * headers once the engine accepted every prompt, then one SSE chunk per generated token (the tokens of one
 * engine step arrive together and are flushed together; a scripted answer's token that streams nothing gets none,
 * {@link #withheld}), then the usage chunk if asked and {@code [DONE]}. A
 * failed write (client gone) aborts the engine requests.
 */
final class ResponseStream {

  private static final Logger log = LoggerFactory.getLogger(ResponseStream.class);
  private static final JsonFactory JSON = new JsonFactory();
  private static final byte[] DATA = "data: ".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] END = "\n\n".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] DONE = "data: [DONE]\n\n".getBytes(StandardCharsets.US_ASCII);

  private record Accepted(int choice) {}

  private record Token(int choice, int tokenId, int index, boolean last) {}

  private record Finished(int choice, RequestOutcome outcome) {}

  private record Failed(int choice, RequestFailure failure) {}

  private final HttpExchange exchange;
  private final ApiRequest request;
  private final String id;
  private final long created;
  private final String[] engineIds;
  /** Per choice, the output length at which the model ends its turn ({@code stop}), or -1 (runs to its length). */
  private final int[] stopsAt;
  private final PromptEncoder encoder;
  /** Per choice, the text of each generated token of a scripted chat answer (null: the encoder's token text). */
  private final CompletableFuture<String[][]> scriptedText;
  private final Executor writer;
  private final Consumer<String> abort;
  private final String servedBy;
  private final long receivedNanos;
  private final LongConsumer firstChunk;
  /** A {@code /v1/responses} answer's events and object; null for the other endpoints. */
  private final ResponsesEvents responses;
  /** A {@code /v1/messages} answer's events and message; null for the other endpoints. */
  private final MessagesEvents messages;
  private final ConcurrentLinkedQueue<Object> inbox = new ConcurrentLinkedQueue<>();
  private final AtomicBoolean draining = new AtomicBoolean();

  // Drain state: touched only inside drain(), which the draining flag serializes.
  private final ByteArrayOutputStream chunk = new ByteArrayOutputStream(256);
  /** Per choice, a scripted answer's reasoning (its think block's words), which vLLM's reasoning parser splits off. */
  private final StringBuilder[] reasoning;
  private final StringBuilder[] text;
  private final boolean[] ended;
  /** Per choice, the tokens generated so far. */
  private final int[] generated;
  private OutputStream body;
  private int accepted;
  /** Whether the chat role chunks went out: vLLM sends them with the first engine output, not at acceptance. */
  private boolean roleSent;
  private int finishedCount;
  private long promptTokens;
  private long completionTokens;
  private long cachedTokens;
  private boolean done;
  /** Whether a token chunk was written; the first flush after one times the server's own TTFT. */
  private boolean tokenWritten;
  private boolean firstChunkTimed;

  /**
   * @param stopsAt per choice, the output length at which the model ends its turn (finish reason {@code stop}), or
   *     -1: the choice runs to {@code max_tokens} or the context length ({@code length})
   * @param scriptedText per choice, the text each generated token of a scripted chat answer streams, completed
   *     while the engine prefills (tokens past it stream {@code encoder}'s text); or null for every token's
   *     {@code encoder} text
   * @param receivedNanos when the server took the request ({@link System#nanoTime()})
   * @param firstChunk given, once per streamed response, the nanoseconds from {@code receivedNanos} to the flush of
   *     its first token chunk: the server's own TTFT, which the engine's histogram leaves out (parsing,
   *     tokenizing, the hand-off to the engine thread, the writer pool)
   */
  ResponseStream(HttpExchange exchange, ApiRequest request, String id, long created, String[] engineIds,
      int[] stopsAt, PromptEncoder encoder, CompletableFuture<String[][]> scriptedText, Executor writer,
      Consumer<String> abort, String servedBy, long receivedNanos, LongConsumer firstChunk) {
    this.exchange = exchange;
    this.request = request;
    this.id = id;
    this.created = created;
    this.engineIds = engineIds;
    this.stopsAt = stopsAt;
    this.encoder = encoder;
    this.scriptedText = scriptedText;
    this.writer = writer;
    this.abort = abort;
    this.servedBy = servedBy;
    this.receivedNanos = receivedNanos;
    this.firstChunk = firstChunk;
    this.responses = request.responses() ? new ResponsesEvents(request.response(), created) : null;
    this.messages = request.messages()
        ? new MessagesEvents(id, request.model(), request.prompts().get(0).length) : null;
    this.text = new StringBuilder[engineIds.length];
    this.reasoning = new StringBuilder[engineIds.length];
    this.ended = new boolean[engineIds.length];
    this.generated = new int[engineIds.length];
    for (int i = 0; i < text.length; i++) {
      text[i] = new StringBuilder();
      reasoning[i] = new StringBuilder();
    }
  }

  /** The observer of the {@code choice}-th prompt; its callbacks run on the engine thread. */
  RequestObserver observer(int choice) {
    return new RequestObserver() {
      @Override
      public void onAccepted() {
        post(new Accepted(choice));
      }

      @Override
      public void onToken(int tokenId, int index, long atNanos, int cached, boolean last) {
        post(new Token(choice, tokenId, index, last));
      }

      @Override
      public void onFinished(RequestOutcome outcome) {
        post(new Finished(choice, outcome));
      }

      @Override
      public void onFailed(RequestFailure failure) {
        post(new Failed(choice, failure));
      }
    };
  }

  private void post(Object event) {
    inbox.add(event);
    if (draining.compareAndSet(false, true)) {
      try {
        writer.execute(this::drain);
      } catch (RuntimeException e) {
        draining.set(false);
        log.warn("response writer rejected work; aborting the request", e);
        for (String engineId : engineIds) {
          abort.accept(engineId); // idempotent in the engine; no drain state is touched here
        }
      }
    }
  }

  private void drain() {
    try {
      Object e;
      boolean wrote = false;
      while ((e = inbox.poll()) != null) {
        if (!done) {
          wrote |= handle(e);
        }
      }
      if (wrote && body != null && !done) {
        body.flush();
      }
      if (tokenWritten && !firstChunkTimed) {
        firstChunkTimed = true;
        firstChunk.accept(System.nanoTime() - receivedNanos);
      }
    } catch (IOException | RuntimeException ex) {
      log.debug("response {} could not be written ({}); aborting", id, ex.toString());
      finishWithAbort();
    } finally {
      draining.set(false);
      if (!inbox.isEmpty() && draining.compareAndSet(false, true)) {
        writer.execute(this::drain);
      }
    }
  }

  /** Handles one event; returns whether something was written to the stream. */
  private boolean handle(Object e) throws IOException {
    if (e instanceof Accepted) {
      if (++accepted == engineIds.length && request.stream()) {
        startStream();
        if (responses != null) {
          responses.started(body); // vLLM yields both events before it reads the engine's first output
        }
        return true;
      }
      return false;
    }
    if (e instanceof Token t) {
      generated[t.choice()] = t.index() + 1;
      if (request.stream()) {
        if (responses != null) {
          responses.delta(body, text(t));
        } else if (messages != null) {
          // the hermes parser's content, all before <tool_call>, is what vLLM's converter streams as text
          messages.delta(body, separatorToken(t.index()) ? request.toolScript().separator() : text(t),
              reasoningToken(t.index()));
        } else {
          if (request.chat() && !roleSent) {
            writeRoleChunks();
          }
          if (!withheld(t)) {
            writeTokenChunk(t);
          }
        }
        tokenWritten = true;
        return true;
      }
      (reasoningToken(t.index()) ? reasoning : text)[t.choice()].append(text(t));
      return false;
    }
    if (e instanceof Finished f) {
      ended[f.choice()] = true;
      RequestOutcome o = f.outcome();
      promptTokens += o.promptTokens();
      completionTokens += o.completionTokens();
      cachedTokens += o.cachedTokens();
      if (++finishedCount == engineIds.length) {
        complete();
      }
      return request.stream();
    }
    Failed f = (Failed) e;
    ended[f.choice()] = true;
    fail(f.failure());
    return false;
  }

  /**
   * Headers as soon as every engine accepted the request. The chat role chunk waits for the first token, as vLLM
   * writes it in the first iteration over the engine's outputs: a gateway that takes the first body chunk for the
   * end of the prefill (the router's load ledger does) must not see it while the prompt is still being computed.
   */
  private void startStream() throws IOException {
    exchange.getResponseHeaders().set("Content-Type", "text/event-stream; charset=utf-8");
    exchange.getResponseHeaders().set("Cache-Control", "no-cache");
    exchange.getResponseHeaders().set(SimHttpServer.SERVED_BY, servedBy);
    exchange.sendResponseHeaders(200, 0);
    body = exchange.getResponseBody();
  }

  private void writeRoleChunks() throws IOException {
    roleSent = true;
    for (int i = 0; i < engineIds.length; i++) {
      JsonGenerator g = chunkStart();
      g.writeArrayFieldStart("choices");
      g.writeStartObject();
      g.writeNumberField("index", i);
      g.writeObjectFieldStart("delta");
      g.writeStringField("role", "assistant");
      g.writeStringField("content", "");
      g.writeEndObject();
      g.writeNullField("logprobs");
      g.writeNullField("finish_reason");
      g.writeEndObject();
      g.writeEndArray();
      chunkEnd(g);
    }
  }

  private void writeTokenChunk(Token t) throws IOException {
    JsonGenerator g = chunkStart();
    g.writeArrayFieldStart("choices");
    g.writeStartObject();
    g.writeNumberField("index", t.choice());
    String s = text(t);
    if (request.chat()) {
      g.writeObjectFieldStart("delta");
      if (reasoningToken(t.index())) {
        g.writeStringField("reasoning", s); // vLLM's DeltaMessage field for the reasoning parser's part
      } else if (separatorToken(t.index())) {
        g.writeStringField("content", request.toolScript().separator());
      } else if (!callToken(t.index())) {
        g.writeStringField("content", s);
      }
      if (t.last() && "tool_calls".equals(finishReason(t.choice()))) {
        writeToolCalls(g, true);
      }
      g.writeEndObject();
      g.writeNullField("logprobs");
    } else {
      g.writeStringField("text", s);
      g.writeNullField("logprobs");
    }
    if (t.last()) {
      g.writeStringField("finish_reason", finishReason(t.choice()));
    } else {
      g.writeNullField("finish_reason");
    }
    g.writeNullField("stop_reason");
    g.writeEndObject();
    g.writeEndArray();
    chunkEnd(g);
  }

  /** Whether generated token {@code index} belongs to a scripted answer's think block. */
  private boolean reasoningToken(int index) {
    return request.toolScript() != null && request.toolScript().reasoning(index);
  }

  /** Whether generated token {@code index} belongs to a scripted answer's tool calls (not its text). */
  private boolean callToken(int index) {
    return request.toolScript() != null && index >= request.toolScript().textTokens();
  }

  /**
   * A token of a scripted answer, before the last, that streams nothing: a tool call's (vLLM's tool parser withholds
   * them until the call parses, and the last chunk carries the calls with the finish reason), {@code <think>} and
   * {@code </think>} (the reasoning parser skips them), and a word's tokens before the one that completes it. The
   * parsers return no delta for them, and vLLM's chat stream then sends no chunk; only the finishing token gets one,
   * empty if need be.
   */
  private boolean withheld(Token t) {
    return request.toolScript() != null && !t.last() && !separatorToken(t.index()) && text(t).isEmpty();
  }

  /**
   * The first call token, which is the separator the template writes before the calls when there is text (Qwen3's
   * {@code \n}): vLLM's hermes tool parser streams it as content at once (nothing of {@code <tool_call>} yet).
   */
  private boolean separatorToken(int index) {
    return request.toolScript() != null && !request.toolScript().separator().isEmpty()
        && index == request.toolScript().textTokens();
  }

  /**
   * The scripted answer's calls as {@code tool_calls}: a stream's delta gives each its {@code index}, as vLLM's
   * tool parsers stream them.
   */
  private void writeToolCalls(JsonGenerator g, boolean delta) throws IOException {
    g.writeArrayFieldStart("tool_calls");
    int i = 0;
    for (com.fasterxml.jackson.databind.JsonNode c : request.toolScript().answer().chatToolCalls()) {
      g.writeStartObject();
      if (delta) {
        g.writeNumberField("index", i++);
      }
      g.writeStringField("id", c.path("id").asText());
      g.writeStringField("type", "function");
      g.writeObjectFieldStart("function");
      g.writeStringField("name", c.path("function").path("name").asText());
      g.writeStringField("arguments", c.path("function").path("arguments").asText());
      g.writeEndObject();
      g.writeEndObject();
    }
    g.writeEndArray();
  }

  private String text(Token t) {
    String[][] scripts = scripts();
    String[] script = scripts == null ? null : scripts[t.choice()];
    return script != null && t.index() < script.length ? script[t.index()] : encoder.tokenText(t.tokenId());
  }

  /**
   * {@code stop} when the choice ended at the model's end of turn ({@code tool_calls} for a scripted tool-call
   * answer, as vLLM reports calls its tool parser extracted), else {@code length}: the simulated model has no EOS of
   * its own, and a scripted answer that did not fit in {@code max_tokens} was cut (vLLM's
   * {@code FINISHED_LENGTH_CAPPED}).
   */
  private String finishReason(int choice) {
    return generated[choice] != stopsAt[choice] ? "length" : called() ? "tool_calls" : "stop";
  }

  /** Whether the request scripts an answer with tool calls (a scripted reasoning answer may have none). */
  private boolean called() {
    return request.toolScript() != null && !request.toolScript().answer().calls().isEmpty();
  }

  /** The scripted answers' text, once computed (it always is: the server completes it); null when it failed. */
  private String[][] scripts() {
    if (scriptedText == null) {
      return null;
    }
    try {
      return scriptedText.join();
    } catch (CompletionException e) {
      return null; // the tokens' own text then
    }
  }

  private void complete() throws IOException {
    done = true;
    boolean cut = "length".equals(finishReason(0));
    // a scripted tool-call answer that ended its turn carries its calls; cut by max_tokens it is text only
    List<ToolCallAnswer.Call> calls = cut || !called() ? null : request.toolScript().answer().calls();
    if (request.stream()) {
      if (responses != null) {
        responses.completed(body, cut, promptTokens, completionTokens, cachedTokens);
        body.flush();
        exchange.close();
        return;
      }
      if (messages != null) {
        messages.completed(body, cut, calls, promptTokens, completionTokens, cachedTokens);
        body.flush();
        exchange.close();
        return;
      }
      if (request.includeUsage()) {
        JsonGenerator g = chunkStart();
        g.writeArrayFieldStart("choices");
        g.writeEndArray();
        usage(g);
        chunkEnd(g);
      }
      body.write(DONE);
      body.flush();
      exchange.close();
      return;
    }
    if (responses != null) {
      sendJson(responses.response(text[0].toString(), cut, promptTokens, completionTokens, cachedTokens));
      return;
    }
    if (messages != null) {
      sendJson(messages.response(reasoning[0].toString(), content(0), cut, calls, promptTokens,
          completionTokens, cachedTokens));
      return;
    }
    chunk.reset();
    try (JsonGenerator g = JSON.createGenerator(chunk)) {
      g.writeStartObject();
      g.writeStringField("id", id);
      g.writeStringField("object", request.chat() ? "chat.completion" : "text_completion");
      g.writeNumberField("created", created);
      g.writeStringField("model", request.model());
      g.writeArrayFieldStart("choices");
      for (int i = 0; i < engineIds.length; i++) {
        g.writeStartObject();
        g.writeNumberField("index", i);
        if (request.chat()) {
          g.writeObjectFieldStart("message");
          g.writeStringField("role", "assistant");
          boolean called = "tool_calls".equals(finishReason(i));
          if ((called || reasoning[i].length() > 0) && text[i].length() == 0) {
            // vLLM's tool and reasoning parsers return no content when nothing precedes the calls or follows the
            // think block
            g.writeNullField("content");
          } else {
            g.writeStringField("content", content(i));
          }
          if (called) {
            writeToolCalls(g, false);
          }
          if (reasoning[i].length() > 0) {
            g.writeStringField("reasoning", reasoning[i].toString()); // vLLM's ChatMessage.reasoning
          }
          g.writeEndObject();
        } else {
          g.writeStringField("text", text[i].toString());
        }
        g.writeNullField("logprobs");
        g.writeStringField("finish_reason", finishReason(i));
        g.writeNullField("stop_reason");
        g.writeEndObject();
      }
      g.writeEndArray();
      usage(g);
      g.writeEndObject();
    }
    sendJson(chunk.toByteArray());
  }

  /**
   * A choice's text as vLLM's hermes tool parser returns it: all before {@code <tool_call>}, so with the separator
   * the template writes before the calls once it was generated.
   */
  private String content(int choice) {
    ToolCallScript tool = request.toolScript();
    boolean separated = tool != null && generated[choice] > tool.textTokens();
    return text[choice] + (separated ? tool.separator() : "");
  }

  private void sendJson(byte[] bytes) throws IOException {
    exchange.getResponseHeaders().set("Content-Type", "application/json");
    exchange.getResponseHeaders().set(SimHttpServer.SERVED_BY, servedBy);
    exchange.sendResponseHeaders(200, bytes.length);
    try (OutputStream out = exchange.getResponseBody()) {
      out.write(bytes);
    }
    exchange.close();
  }

  private void usage(JsonGenerator g) throws IOException {
    g.writeObjectFieldStart("usage");
    g.writeNumberField("prompt_tokens", promptTokens);
    g.writeNumberField("total_tokens", promptTokens + completionTokens);
    g.writeNumberField("completion_tokens", completionTokens);
    g.writeObjectFieldStart("prompt_tokens_details");
    g.writeNumberField("cached_tokens", cachedTokens);
    g.writeEndObject();
    g.writeEndObject();
  }

  private void fail(RequestFailure failure) throws IOException {
    done = true;
    abortRemaining();
    OpenAiError error = error(failure);
    if (body == null) {
      if (messages != null) {
        // vLLM's Messages handler translates the chat handler's error into Anthropic's shape
        SimHttpServer.sendJson(exchange, error.status(), MessagesEvents.errorBody(error), servedBy);
        return;
      }
      SimHttpServer.sendError(exchange, error, servedBy);
      return;
    }
    // Headers are out: report the failure in the stream, as vLLM does, then end it.
    if (responses != null || messages != null) {
      if (responses != null) {
        responses.error(body, error);
      } else {
        messages.error(body, error);
      }
      body.flush();
      exchange.close();
      return;
    }
    byte[] json = error.toJson().getBytes(StandardCharsets.UTF_8);
    body.write(DATA);
    body.write(json);
    body.write(END);
    body.write(DONE);
    body.flush();
    exchange.close();
  }

  private static OpenAiError error(RequestFailure f) {
    return switch (f.kind()) {
      case INVALID -> OpenAiError.badRequest(f.message());
      case OVERLOADED -> new OpenAiError(503, "server_error", "server_overloaded", f.message(), null);
      case UNAVAILABLE -> new OpenAiError(503, "server_error", "engine_unavailable", f.message(), null);
      case ENGINE_DEAD -> new OpenAiError(500, "server_error", "engine_dead", f.message(), null);
      case ABORTED -> new OpenAiError(499, "server_error", "aborted", f.message(), null);
    };
  }

  private void finishWithAbort() {
    done = true;
    abortRemaining();
    exchange.close();
  }

  private void abortRemaining() {
    for (int i = 0; i < engineIds.length; i++) {
      if (!ended[i]) {
        ended[i] = true;
        abort.accept(engineIds[i]);
      }
    }
  }

  private JsonGenerator chunkStart() throws IOException {
    chunk.reset();
    JsonGenerator g = JSON.createGenerator(chunk);
    g.writeStartObject();
    g.writeStringField("id", id);
    g.writeStringField("object", request.chat() ? "chat.completion.chunk" : "text_completion");
    g.writeNumberField("created", created);
    g.writeStringField("model", request.model());
    return g;
  }

  private void chunkEnd(JsonGenerator g) throws IOException {
    g.writeEndObject();
    g.close();
    body.write(DATA);
    chunk.writeTo(body);
    body.write(END);
  }
}
