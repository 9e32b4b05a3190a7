package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.kvrouter.examples.sim.engine.EngineStats;
import dev.kvrouter.examples.sim.engine.RequestFailure;
import dev.kvrouter.examples.sim.engine.RequestObserver;
import dev.kvrouter.examples.sim.engine.RequestOutcome;
import dev.kvrouter.examples.sim.engine.RequestSpec;
import dev.kvrouter.examples.sim.engine.SimEngine;
import dev.kvrouter.examples.sim.events.EventFaults;
import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import dev.kvrouter.extproc.request.OpenAiError;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.regex.Pattern;
import net.openhft.hashing.LongHashFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The OpenAI-compatible HTTP front of one simulated vLLM worker ({@code com.sun.net.httpserver}).
 *
 * <p>Endpoints: {@code POST /v1/completions}, {@code POST /v1/chat/completions}, {@code POST /v1/responses},
 * {@code POST /v1/messages} (streaming SSE or not; Responses as vLLM's non-Harmony path answers them,
 * {@link ResponsesEvents}; Anthropic Messages as vLLM's {@code AnthropicServingMessages}, {@link MessagesEvents}),
 * {@code POST /v1/messages/count_tokens},
 * {@code GET /v1/models}, {@code GET /health}, {@code GET /metrics} (vLLM metric names),
 * {@code POST /reset_prefix_cache}, and the simulator's admin endpoints {@code GET|POST /admin/faults} and
 * {@code GET /admin/stats}. Every response carries {@code x-kvrouter-served-by: <worker name>}.
 *
 * <p>Threads: a small bounded pool parses, tokenizes and submits requests and answers the cheap endpoints; when
 * it is saturated the accepting thread runs the handler itself (back-pressure instead of an unbounded queue).
 * Handlers do not wait for generation: responses are written by {@link ResponseStream} on the shared writer
 * executor as the engine produces tokens.
 */
public final class SimHttpServer implements AutoCloseable {

  /** Response header naming the worker that served the request. */
  public static final String SERVED_BY = "x-kvrouter-served-by";

  private static final Logger log = LoggerFactory.getLogger(SimHttpServer.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern REQUEST_ID = Pattern.compile("[A-Za-z0-9._:-]{1,128}");
  private static final Set<String> FAULT_KEYS = Set.of("drop_rate", "delay_ms", "reorder_rate", "stop_publishing",
      "slowdown", "crash_down_ms");

  /**
   * Server settings.
   *
   * @param bind listen address (127.0.0.1 unless told otherwise)
   * @param port listen port, 0 for an ephemeral one
   * @param maxBodyBytes larger request bodies get 413
   * @param handlerThreads handler pool size
   */
  public record Options(String bind, int port, int maxBodyBytes, int handlerThreads) {
    public Options {
      Objects.requireNonNull(bind, "bind");
      if (port < 0 || port > 65535 || maxBodyBytes < 1 || handlerThreads < 1) {
        throw new IllegalArgumentException("invalid HTTP options");
      }
    }

    public static Options loopback(int port) {
      return new Options("127.0.0.1", port, 64 << 20, 4);
    }
  }

  private final String name;
  private final SimEngine engine;
  private final PromptEncoder encoder;
  private final FaultControl faults;
  private final Executor writer;
  private final Options options;
  private final ApiRequestParser parser;
  private final MetricsRenderer metrics;
  /** Streamed responses' server-side TTFT (request taken to first token chunk flushed), summed, and their count. */
  private final LongAdder firstChunkNanos = new LongAdder();
  private final LongAdder firstChunks = new LongAdder();
  private final ScriptedOutput scripted;
  private final ScriptedChatAnswers chatAnswers;
  private final PromptEncoder responseText;
  private final AtomicLong requestCounter = new AtomicLong();
  private HttpServer server;
  /** The port, kept while suspended. */
  private volatile int boundPort;
  private ThreadPoolExecutor handlers;

  /**
   * @param scripted a request's {@code seed} names its output ({@link ScriptedOutput}; the engine must have been
   *     built with its {@link ScriptedOutput#tokens()}), or {@code null} for the default output
   * @param chatAnswers with {@code scripted}, a chat request's {@code seed} names a scripted chat answer (the engine
   *     must have been built with its {@link ScriptedChatAnswers#over}), or {@code null}
   */
  public SimHttpServer(String name, SimEngine engine, PromptEncoder encoder, FaultControl faults, Executor writer,
      Options options, Double gpuMemoryUtilization, ScriptedOutput scripted, ScriptedChatAnswers chatAnswers) {
    this.name = Objects.requireNonNull(name, "name");
    this.engine = Objects.requireNonNull(engine, "engine");
    this.encoder = Objects.requireNonNull(encoder, "encoder");
    this.faults = Objects.requireNonNull(faults, "faults");
    this.writer = Objects.requireNonNull(writer, "writer");
    this.options = Objects.requireNonNull(options, "options");
    this.metrics = new MetricsRenderer(engine.config(), gpuMemoryUtilization);
    this.scripted = scripted;
    this.chatAnswers = scripted == null ? null : chatAnswers;
    this.parser = new ApiRequestParser(engine.config(), encoder, this.chatAnswers != null);
    this.responseText = scripted == null ? encoder : scripted.rendering(encoder);
  }

  public SimHttpServer start() throws IOException {
    AtomicInteger n = new AtomicInteger();
    handlers = new ThreadPoolExecutor(options.handlerThreads(), options.handlerThreads(), 30, TimeUnit.SECONDS,
        new ArrayBlockingQueue<>(256), r -> {
          Thread t = new Thread(r, "sim-http-" + name + "-" + n.incrementAndGet());
          t.setDaemon(true);
          return t;
        }, new ThreadPoolExecutor.CallerRunsPolicy());
    listen(options.port());
    return this;
  }

  private void listen(int port) throws IOException {
    server = HttpServer.create(new InetSocketAddress(options.bind(), port), 1024);
    server.setExecutor(handlers);
    server.createContext("/", this::handle);
    server.start();
    boundPort = port == 0 ? server.getAddress().getPort() : port;
  }

  /**
   * The process is gone: the listening socket and every open connection are closed, so clients get connection
   * refused or reset (a vLLM whose engine died exits). {@link #resume} listens on the same port again.
   */
  public synchronized void suspend() {
    if (server != null) {
      server.stop(0);
      server = null;
    }
  }

  /** A new process listens on the port the server had. */
  public synchronized void resume() throws IOException {
    if (server == null) {
      listen(boundPort);
    }
  }

  public int port() {
    return boundPort;
  }

  public String name() {
    return name;
  }

  @Override
  public synchronized void close() {
    if (server != null) {
      server.stop(0);
      server = null;
    }
    if (handlers != null) {
      handlers.shutdownNow();
    }
  }

  private void handle(HttpExchange ex) {
    String path = ex.getRequestURI().getPath();
    String method = ex.getRequestMethod();
    try {
      if (path.startsWith("/metrics/")) {
        get(ex, method, () -> metricsApp(ex)); // vLLM mounts prometheus_client's app on every path under /metrics
        return;
      }
      switch (path) {
        case "/v1/completions" -> post(ex, method, () -> generate(ex, Kind.COMPLETIONS));
        case "/v1/chat/completions" -> post(ex, method, () -> generate(ex, Kind.CHAT));
        case "/v1/responses" -> post(ex, method, () -> generate(ex, Kind.RESPONSES));
        case "/v1/messages" -> post(ex, method, () -> anthropic(ex, () -> generate(ex, Kind.MESSAGES)));
        case "/v1/messages/count_tokens" -> post(ex, method, () -> anthropic(ex, () -> countTokens(ex)));
        case "/v1/models" -> get(ex, method, () -> models(ex));
        case "/health" -> get(ex, method, () -> health(ex));
        case "/metrics" -> get(ex, method, () -> metrics(ex));
        case "/admin/stats" -> get(ex, method, () -> stats(ex));
        case "/admin/faults" -> faults(ex, method);
        case "/reset_prefix_cache" -> post(ex, method, () -> resetPrefixCache(ex));
        default -> sendError(ex, new OpenAiError(404, "NotFoundError", "not_found", "Not Found", null), name);
      }
    } catch (ApiException e) {
      sendError(ex, e.error(), name);
    } catch (IOException | RuntimeException e) {
      log.warn("worker {}: {} {} failed: {}", name, method, path, e.toString());
      sendError(ex, OpenAiError.internal("internal error in the simulated worker"), name);
    }
  }

  @FunctionalInterface
  private interface Action {
    void run() throws IOException, ApiException;
  }

  private void post(HttpExchange ex, String method, Action a) throws IOException, ApiException {
    if (!"POST".equals(method)) {
      throw new ApiException(new OpenAiError(405, "invalid_request_error", "method_not_allowed",
          "Method Not Allowed", null));
    }
    a.run();
  }

  private void get(HttpExchange ex, String method, Action a) throws IOException, ApiException {
    if (!"GET".equals(method)) {
      throw new ApiException(new OpenAiError(405, "invalid_request_error", "method_not_allowed",
          "Method Not Allowed", null));
    }
    a.run();
  }

  /**
   * vLLM answers a Messages (or count_tokens) request's validation errors (400) as FastAPI's handler does, in
   * OpenAI's shape, and every error of its handler (an unknown model, an engine that is down) in Anthropic's.
   */
  private void anthropic(HttpExchange ex, Action a) throws IOException, ApiException {
    try {
      a.run();
    } catch (ApiException e) {
      if (e.error().status() == 400) {
        throw e;
      }
      sendJson(ex, e.error().status(), MessagesEvents.errorBody(e.error()), name);
    }
  }

  /**
   * {@code POST /v1/messages/count_tokens}: the prompt's length, rendered and tokenized as for {@code /v1/messages}
   * and never sent to the engine (vLLM's handler only renders), so it is answered while the engine restarts too.
   * The body is vLLM's {@code AnthropicCountTokensResponse} without its null fields.
   */
  private void countTokens(HttpExchange ex) throws IOException, ApiException {
    int n = parser.countMessagesTokens(readBody(ex));
    ObjectNode root = JSON.createObjectNode();
    root.put("input_tokens", n);
    root.putObject("context_management").put("original_input_tokens", n);
    sendJson(ex, 200, JSON.writeValueAsBytes(root), name);
  }

  private void generate(HttpExchange ex, Kind kind) throws IOException, ApiException {
    long received = System.nanoTime();
    byte[] body = readBody(ex);
    ApiRequest req = parser.parse(kind, body);
    boolean chat = req.chat();
    if (!engine.isUp()) {
      throw new ApiException(new OpenAiError(503, "server_error", "engine_unavailable",
          "The engine is restarting.", null));
    }
    long seq = requestCounter.incrementAndGet();
    String clientId = ex.getRequestHeaders().getFirst("x-request-id");
    String base = clientId != null && REQUEST_ID.matcher(clientId).matches() ? clientId : name + "-" + seq;
    // a Responses answer's id is the request's request_id, as vLLM's ResponsesResponse.from_request makes it; a
    // Messages answer's is the chat completion's it was converted into
    String id = req.responses() ? req.response().get("id").asText()
        : (chat || req.messages() ? "chatcmpl-" : "cmpl-") + base;
    List<int[]> prompts = req.prompts();
    RequestSpec[] specs = new RequestSpec[prompts.size()];
    String[] engineIds = new String[prompts.size()];
    // a seeded chat (or Responses) request of a scripted worker: the chat answer its seed names, per choice
    boolean chatAnswer = (chat || req.responses()) && chatAnswers != null && req.seeded();
    // a Messages request scripting a tool-call answer (read only by a scripted worker): that answer
    ToolCallScript tool = req.toolScript();
    boolean answer = chatAnswer || tool != null;
    ScriptedChatAnswers.Generation[] answers = answer ? new ScriptedChatAnswers.Generation[specs.length] : null;
    // per choice, the output length at which the model ends its turn (stop), or -1: it runs to max_tokens (length)
    int[] stopsAt = new int[specs.length];
    java.util.Arrays.fill(stopsAt, -1);
    try {
      for (int i = 0; i < specs.length; i++) {
        int[] p = prompts.get(i);
        engineIds[i] = name + "-" + seq + "-" + i;
        long outputSeed = LongHashFunction.xx3(req.seed()).hashInts(p);
        int maxTokens = req.maxTokens();
        if (answer) {
          answers[i] = tool != null ? chatAnswers.startToolCall(tool)
              : chatAnswers.start(req.seed(), req.answerWords() > 0 ? req.answerWords() : req.maxTokens());
          outputSeed = answers[i].outputSeed();
          maxTokens = answers[i].budget(req.maxTokens(), req.ignoreEos());
          if (answers[i].stops(req.maxTokens(), req.ignoreEos())) {
            stopsAt[i] = maxTokens;
          }
        } else if (scripted != null) {
          outputSeed = scripted.outputSeed(req, outputSeed);
        }
        specs[i] = new RequestSpec(engineIds[i], p, maxTokens, req.adapter(), req.cacheSalt(), outputSeed,
            req.media());
        String invalid = engine.validate(specs[i]);
        if (invalid != null) {
          throw ApiException.badRequest(invalid, "prompt");
        }
      }
    } catch (ApiException | RuntimeException e) {
      endAll(answers);
      throw e;
    }
    // a scripted answer's text per token is computed once the engine has the request, while it prefills
    CompletableFuture<String[][]> text = answer ? new CompletableFuture<>() : null;
    ResponseStream rs = new ResponseStream(ex, req, id, System.currentTimeMillis() / 1000, engineIds, stopsAt,
        responseText, text, writer, engine::abort, name, received, nanos -> {
          firstChunkNanos.add(nanos);
          firstChunks.increment();
        });
    try {
      for (int i = 0; i < specs.length; i++) {
        RequestObserver observer = rs.observer(i);
        engine.submit(specs[i], answer ? ending(observer, answers[i].outputSeed()) : observer);
      }
    } finally {
      // always completed: the response writer, shared by every stream, waits on it at the first token
      if (answer) {
        try {
          String[][] t = new String[answers.length][];
          for (int i = 0; i < answers.length; i++) {
            t[i] = tool != null ? tool.deltas() : chatAnswers.deltas(answers[i]);
          }
          text.complete(t);
        } catch (RuntimeException e) {
          text.completeExceptionally(e);
        }
      }
    }
  }

  /** Ends the generations started so far ({@code answers} may be null or partly filled). */
  private void endAll(ScriptedChatAnswers.Generation[] answers) {
    if (answers != null) {
      for (ScriptedChatAnswers.Generation g : answers) {
        if (g != null) {
          chatAnswers.finished(g.outputSeed());
        }
      }
    }
  }

  /** {@code o}, ending the scripted chat answer under {@code outputSeed} when its request ends (engine thread). */
  private RequestObserver ending(RequestObserver o, long outputSeed) {
    return new RequestObserver() {
      @Override
      public void onAccepted() {
        o.onAccepted();
      }

      @Override
      public void onToken(int tokenId, int index, long atNanos, int cached, boolean last) {
        o.onToken(tokenId, index, atNanos, cached, last);
      }

      @Override
      public void onFinished(RequestOutcome outcome) {
        chatAnswers.finished(outputSeed);
        o.onFinished(outcome);
      }

      @Override
      public void onFailed(RequestFailure failure) {
        chatAnswers.finished(outputSeed);
        o.onFailed(failure);
      }
    };
  }

  private void models(HttpExchange ex) throws IOException {
    ObjectNode root = JSON.createObjectNode();
    root.put("object", "list");
    var data = root.putArray("data");
    long created = System.currentTimeMillis() / 1000;
    String base = engine.config().model();
    addModel(data.addObject(), base, base, null, created);
    for (String a : engine.config().adapters()) {
      addModel(data.addObject(), a, a, base, created);
    }
    sendJson(ex, 200, JSON.writeValueAsBytes(root), name);
  }

  private void addModel(ObjectNode m, String id, String root, String parent, long created) {
    m.put("id", id);
    m.put("object", "model");
    m.put("created", created);
    m.put("owned_by", "vllm");
    m.put("root", root);
    if (parent == null) {
      m.putNull("parent");
    } else {
      m.put("parent", parent);
    }
    m.put("max_model_len", engine.config().maxModelLen());
  }

  private void health(HttpExchange ex) throws IOException {
    if (engine.isUp()) {
      send(ex, 200, new byte[0], null, name);
    } else {
      sendError(ex, new OpenAiError(503, "server_error", "engine_unavailable", "The engine is restarting.",
          null), name);
    }
  }

  private EngineStats engineStats() throws ApiException {
    try {
      return engine.stats().get(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ApiException(OpenAiError.internal("interrupted"));
    } catch (Exception e) {
      throw new ApiException(new OpenAiError(503, "server_error", "engine_busy",
          "The engine did not answer within 5 s.", null));
    }
  }

  private void metrics(HttpExchange ex) throws IOException, ApiException {
    byte[] text = metrics.render(engineStats(), engine.isUp(), firstChunkNanos.sum() / 1e9, firstChunks.sum())
        .getBytes(StandardCharsets.UTF_8);
    send(ex, 200, text, "text/plain; version=0.0.4; charset=utf-8", name);
  }

  /** As prometheus_client's app: {@code name[]} parameters keep the samples of those names only. */
  private void metricsApp(HttpExchange ex) throws IOException, ApiException {
    String page = metrics.render(engineStats(), engine.isUp(), firstChunkNanos.sum() / 1e9, firstChunks.sum());
    Set<String> names = new HashSet<>();
    String query = ex.getRequestURI().getRawQuery();
    for (String param : query == null ? new String[0] : query.split("&")) {
      String[] kv = param.split("=", 2);
      if (kv.length == 2 && URLDecoder.decode(kv[0], StandardCharsets.UTF_8).equals("name[]")) {
        names.add(URLDecoder.decode(kv[1], StandardCharsets.UTF_8));
      }
    }
    byte[] text = (names.isEmpty() ? page : MetricsRenderer.restrict(page, names)).getBytes(StandardCharsets.UTF_8);
    send(ex, 200, text, "text/plain; version=0.0.4; charset=utf-8", name);
  }

  private void stats(HttpExchange ex) throws IOException, ApiException {
    EngineStats s = engineStats();
    ObjectNode n = JSON.createObjectNode();
    n.put("worker", name);
    n.put("up", engine.isUp());
    n.put("num_running", s.numRunning());
    n.put("num_waiting", s.numWaiting());
    n.put("kv_cache_usage", s.kvUsage());
    n.put("num_gpu_blocks", s.numGpuBlocks());
    n.put("cached_blocks", s.cachedBlocks());
    n.put("prompt_tokens", s.promptTokens());
    n.put("cached_prompt_tokens", s.cachedPromptTokens());
    n.put("prefill_tokens_computed", s.prefillTokensComputed());
    n.put("generation_tokens", s.generationTokens());
    n.put("prefix_query_tokens", s.prefixQueryTokens());
    n.put("prefix_hit_tokens", s.prefixHitTokens());
    n.put("finished_requests", s.finishedRequests());
    n.put("failed_requests", s.failedRequests());
    n.put("preemptions", s.preemptions());
    n.put("evicted_blocks", s.evictions());
    n.put("steps", s.steps());
    n.put("busy_seconds", s.busyNanos() / 1e9);
    n.put("restarts", s.restarts());
    n.put("images_encoded", s.media().encoderRuns());
    n.put("images_in_prefix_cache", s.media().skippedByPrefix());
    n.put("images_in_encoder_cache", s.media().encoderCacheHits());
    sendJson(ex, 200, JSON.writeValueAsBytes(n), name);
  }

  private void resetPrefixCache(HttpExchange ex) throws IOException, ApiException {
    readBody(ex);
    boolean ok;
    try {
      ok = engine.resetPrefixCache().get(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ApiException(OpenAiError.internal("interrupted"));
    } catch (Exception e) {
      throw new ApiException(OpenAiError.internal("the engine did not answer"));
    }
    if (!ok) {
      throw ApiException.badRequest("The prefix cache cannot be reset while requests hold blocks.", null);
    }
    send(ex, 200, new byte[0], null, name);
  }

  private void faults(HttpExchange ex, String method) throws IOException, ApiException {
    if ("POST".equals(method)) {
      byte[] body = readBody(ex);
      try {
        faults.apply(parseFaults(body));
      } catch (IllegalArgumentException e) {
        throw ApiException.badRequest(e.getMessage(), null);
      }
    } else if (!"GET".equals(method)) {
      throw new ApiException(new OpenAiError(405, "invalid_request_error", "method_not_allowed",
          "Method Not Allowed", null));
    }
    FaultControl.State s = faults.state();
    ObjectNode n = JSON.createObjectNode();
    EventFaults e = s.events();
    n.put("drop_rate", e.dropRate());
    n.put("delay_ms", e.delayMillis());
    n.put("reorder_rate", e.reorderRate());
    n.put("stop_publishing", e.stopped());
    n.put("slowdown", s.slowdown());
    n.put("up", s.up());
    sendJson(ex, 200, JSON.writeValueAsBytes(n), name);
  }

  /** Parses a fault update ({@code drop_rate, delay_ms, reorder_rate, stop_publishing, slowdown, crash_down_ms}). */
  static FaultControl.Update parseFaults(byte[] body) throws ApiException {
    JsonNode n;
    try {
      n = JSON.readTree(body);
    } catch (IOException e) {
      throw ApiException.badRequest("fault settings must be a JSON object", null);
    }
    if (n == null || !n.isObject()) {
      throw ApiException.badRequest("fault settings must be a JSON object", null);
    }
    for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
      String k = it.next();
      if (!FAULT_KEYS.contains(k)) {
        throw ApiException.badRequest("unknown fault setting `" + k + "`; known: " + FAULT_KEYS, k);
      }
    }
    try {
      return new FaultControl.Update(dbl(n, "drop_rate"), lng(n, "delay_ms"), dbl(n, "reorder_rate"),
          n.hasNonNull("stop_publishing") ? bool(n, "stop_publishing") : null, dbl(n, "slowdown"),
          lng(n, "crash_down_ms"));
    } catch (IllegalArgumentException e) {
      throw ApiException.badRequest(e.getMessage(), null);
    }
  }

  private static Double dbl(JsonNode n, String k) {
    JsonNode v = n.get(k);
    if (v == null || v.isNull()) {
      return null;
    }
    if (!v.isNumber()) {
      throw new IllegalArgumentException("`" + k + "` must be a number");
    }
    return v.asDouble();
  }

  private static Long lng(JsonNode n, String k) {
    JsonNode v = n.get(k);
    if (v == null || v.isNull()) {
      return null;
    }
    if (!v.isIntegralNumber() || !v.canConvertToLong()) {
      throw new IllegalArgumentException("`" + k + "` must be an integer");
    }
    return v.asLong();
  }

  private static boolean bool(JsonNode n, String k) {
    JsonNode v = n.get(k);
    if (!v.isBoolean()) {
      throw new IllegalArgumentException("`" + k + "` must be a boolean");
    }
    return v.asBoolean();
  }

  private byte[] readBody(HttpExchange ex) throws IOException, ApiException {
    String cl = ex.getRequestHeaders().getFirst("Content-Length");
    if (cl != null) {
      try {
        if (Long.parseLong(cl.trim()) > options.maxBodyBytes()) {
          throw new ApiException(new OpenAiError(413, "invalid_request_error", "request_too_large",
              "request body exceeds " + options.maxBodyBytes() + " bytes", null));
        }
      } catch (NumberFormatException e) {
        throw ApiException.badRequest("invalid Content-Length", null);
      }
    }
    try (InputStream in = ex.getRequestBody()) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      byte[] buf = new byte[16384];
      int r;
      while ((r = in.read(buf)) > 0) {
        out.write(buf, 0, r);
        if (out.size() > options.maxBodyBytes()) {
          throw new ApiException(new OpenAiError(413, "invalid_request_error", "request_too_large",
              "request body exceeds " + options.maxBodyBytes() + " bytes", null));
        }
      }
      return out.toByteArray();
    }
  }

  static void sendError(HttpExchange ex, OpenAiError error, String servedBy) {
    try {
      send(ex, error.status(), error.toJson().getBytes(StandardCharsets.UTF_8), "application/json", servedBy);
    } catch (IOException e) {
      ex.close();
    }
  }

  static void sendJson(HttpExchange ex, int status, byte[] body, String servedBy) throws IOException {
    send(ex, status, body, "application/json", servedBy);
  }

  private static void send(HttpExchange ex, int status, byte[] body, String contentType, String servedBy)
      throws IOException {
    try {
      ex.getResponseHeaders().set(SERVED_BY, servedBy);
      if (contentType != null) {
        ex.getResponseHeaders().set("Content-Type", contentType);
      }
      ex.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
      if (body.length > 0) {
        try (OutputStream out = ex.getResponseBody()) {
          out.write(body);
        }
      }
    } finally {
      ex.close();
    }
  }
}
