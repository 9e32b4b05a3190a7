package dev.kvrouter.examples.fake;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A minimal OpenAI-compatible worker for wiring tests and the demo: completions and chat, streaming (SSE) and
 * not, {@code /health}, {@code /v1/models}. It does no inference: it answers with a fixed number of tokens and
 * names itself in the {@code x-kvrouter-served-by} header and the {@code system_fingerprint} field, so a test
 * can see where a request landed. The full vLLM-like simulator is {@code dev.kvrouter.examples.sim}.
 */
public final class FakeWorker implements AutoCloseable {

  /** Response header naming the worker that served the request. */
  public static final String SERVED_BY = "x-kvrouter-served-by";

  private static final ObjectMapper JSON = new ObjectMapper();

  static {
    // The JDK server writes headers and body separately; without TCP_NODELAY, Nagle's algorithm and the peer's
    // delayed ACK hold the second write for ~40 ms, which would dominate every latency measured through it.
    System.setProperty("sun.net.httpserver.nodelay", "true");
  }

  private final String name;
  private final String model;
  private final long tokenDelayMillis;
  private final AtomicLong served = new AtomicLong();
  private volatile JsonNode lastHeaders;
  private volatile byte[] lastBody;
  private HttpServer server;
  private ExecutorService executor;

  /**
   * @param tokenDelayMillis pause between streamed tokens, so tests can observe chunk-by-chunk delivery
   */
  public FakeWorker(String name, String model, long tokenDelayMillis) {
    this.name = name;
    this.model = model;
    this.tokenDelayMillis = tokenDelayMillis;
  }

  public FakeWorker start(String bind, int port) throws IOException {
    server = HttpServer.create(new InetSocketAddress(bind, port), 256);
    executor = Executors.newFixedThreadPool(16, r -> {
      Thread t = new Thread(r, "fake-worker-" + name);
      t.setDaemon(true);
      return t;
    });
    server.setExecutor(executor);
    server.createContext("/", this::handle);
    server.start();
    return this;
  }

  public int port() {
    return server.getAddress().getPort();
  }

  public String name() {
    return name;
  }

  /** Requests answered on the inference paths. */
  public long served() {
    return served.get();
  }

  /** Request headers of the last inference request, as a JSON object (lower-case names). */
  public JsonNode lastHeaders() {
    return lastHeaders;
  }

  /** The exact bytes of the last inference request's body (tests check what the router forwarded). */
  public byte[] lastBody() {
    return lastBody;
  }

  private void handle(HttpExchange ex) throws IOException {
    try (ex) {
      String path = ex.getRequestURI().getPath();
      ex.getResponseHeaders().set(SERVED_BY, name);
      switch (path) {
        case "/health" -> send(ex, 200, "text/plain", "ok");
        case "/v1/models" -> send(ex, 200, "application/json",
            "{\"object\":\"list\",\"data\":[{\"id\":" + JSON.writeValueAsString(model)
                + ",\"object\":\"model\",\"owned_by\":\"kvrouter-fake\"}]}");
        case "/v1/completions", "/v1/chat/completions" -> infer(ex, path.endsWith("chat/completions"));
        case "/v1/responses" -> respond(ex);
        default -> send(ex, 404, "application/json", "{\"error\":{\"message\":\"not found\",\"code\":404}}");
      }
    }
  }

  private void infer(HttpExchange ex, boolean chat) throws IOException {
    ObjectNode headers = JSON.createObjectNode();
    ex.getRequestHeaders().forEach((k, v) -> headers.put(k.toLowerCase(java.util.Locale.ROOT), String.join(",", v)));
    lastHeaders = headers;
    JsonNode req = readPost(ex);
    if (req == null) {
      return;
    }
    served.incrementAndGet();
    int tokens = req.path("max_tokens").asInt(req.path("max_completion_tokens").asInt(4));
    tokens = Math.max(1, Math.min(tokens, 256));
    int promptTokens = Math.max(1, req.toString().length() / 4);
    String id = (chat ? "chatcmpl-" : "cmpl-") + name + "-" + served.get();
    if (req.path("stream").asBoolean(false)) {
      stream(ex, chat, id, tokens, promptTokens);
    } else {
      // A real engine answers a non-streamed request when its generation ends; a test that needs that window
      // (a request still waiting for its response) asks for it with this header.
      holdNonStreamed(headers.path(HOLD_HEADER).asText(""));
      ObjectNode body = envelope(chat, id, chat ? "chat.completion" : "text_completion");
      ArrayNode choices = body.putArray("choices");
      ObjectNode c = choices.addObject().put("index", 0).put("finish_reason", "length");
      String text = "tok ".repeat(tokens);
      if (chat) {
        c.putObject("message").put("role", "assistant").put("content", text);
      } else {
        c.put("text", text);
      }
      usage(body, promptTokens, tokens);
      send(ex, 200, "application/json", JSON.writeValueAsString(body));
    }
  }

  /**
   * The Responses API as vLLM answers it when not streamed (responses/protocol.py): the response's {@code id} is the
   * request's {@code request_id}, or a fresh {@code resp_} id without one.
   */
  private void respond(HttpExchange ex) throws IOException {
    JsonNode req = readPost(ex);
    if (req == null) {
      return;
    }
    served.incrementAndGet();
    int inputTokens = Math.max(1, req.toString().length() / 4);
    ObjectNode body = JSON.createObjectNode()
        .put("id", req.path("request_id").asText("resp_" + name + "-" + served.get()))
        .put("object", "response").put("model", model).put("status", "completed");
    body.putArray("output").addObject().put("type", "message").put("role", "assistant").put("status", "completed")
        .putArray("content").addObject().put("type", "output_text").put("text", "tok ");
    ObjectNode usage = body.putObject("usage").put("input_tokens", inputTokens);
    usage.putObject("input_tokens_details").put("cached_tokens", 0);
    usage.put("output_tokens", 1).put("total_tokens", inputTokens + 1);
    send(ex, 200, "application/json", JSON.writeValueAsString(body));
  }

  /** A POST's JSON body, kept as {@link #lastBody}; null when the exchange was answered with an error instead. */
  private JsonNode readPost(HttpExchange ex) throws IOException {
    if (!"POST".equals(ex.getRequestMethod())) {
      send(ex, 405, "application/json", "{\"error\":{\"message\":\"method not allowed\"}}");
      return null;
    }
    byte[] raw = ex.getRequestBody().readAllBytes();
    lastBody = raw;
    try {
      return JSON.readTree(raw);
    } catch (IOException e) {
      send(ex, 400, "application/json", "{\"error\":{\"message\":\"invalid JSON\",\"type\":\"invalid_request_error\"}}");
      return null;
    }
  }

  private void stream(HttpExchange ex, boolean chat, String id, int tokens, int promptTokens) throws IOException {
    ex.getResponseHeaders().set("content-type", "text/event-stream");
    ex.getResponseHeaders().set("cache-control", "no-cache");
    ex.sendResponseHeaders(200, 0);
    OutputStream out = ex.getResponseBody();
    for (int i = 0; i < tokens; i++) {
      ObjectNode chunk = envelope(chat, id, chat ? "chat.completion.chunk" : "text_completion");
      ObjectNode c = chunk.putArray("choices").addObject().put("index", 0);
      if (chat) {
        c.putObject("delta").put("content", "tok" + i + " ");
      } else {
        c.put("text", "tok" + i + " ");
      }
      c.putNull("finish_reason");
      out.write(("data: " + JSON.writeValueAsString(chunk) + "\n\n").getBytes(StandardCharsets.UTF_8));
      out.flush();
      pause();
    }
    ObjectNode last = envelope(chat, id, chat ? "chat.completion.chunk" : "text_completion");
    last.putArray("choices");
    usage(last, promptTokens, tokens);
    out.write(("data: " + JSON.writeValueAsString(last) + "\n\ndata: [DONE]\n\n").getBytes(StandardCharsets.UTF_8));
    out.flush();
  }

  /** Request header: milliseconds (at most 10,000) a non-streamed answer is held before it is sent. */
  public static final String HOLD_HEADER = "x-fake-hold-ms";

  private static void holdNonStreamed(String millis) {
    if (millis.isEmpty()) {
      return;
    }
    try {
      Thread.sleep(Math.min(10_000, Math.max(0, Long.parseLong(millis))));
    } catch (NumberFormatException e) {
      // not a number: no hold
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void pause() {
    if (tokenDelayMillis > 0) {
      try {
        Thread.sleep(tokenDelayMillis);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private ObjectNode envelope(boolean chat, String id, String object) {
    ObjectNode o = JSON.createObjectNode();
    o.put("id", id).put("object", object).put("created", System.currentTimeMillis() / 1000).put("model", model)
        .put("system_fingerprint", name);
    return o;
  }

  private static void usage(ObjectNode o, int prompt, int completion) {
    ObjectNode u = o.putObject("usage");
    u.put("prompt_tokens", prompt).put("completion_tokens", completion).put("total_tokens", prompt + completion);
    u.putObject("prompt_tokens_details").put("cached_tokens", 0);
  }

  private static void send(HttpExchange ex, int status, String type, String body) throws IOException {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    ex.getResponseHeaders().set("content-type", type);
    ex.sendResponseHeaders(status, b.length);
    ex.getResponseBody().write(b);
  }

  @Override
  public void close() {
    if (server != null) {
      server.stop(0);
      executor.shutdownNow();
      try {
        executor.awaitTermination(2, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
