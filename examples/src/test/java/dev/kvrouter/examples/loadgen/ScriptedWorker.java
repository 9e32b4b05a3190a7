package dev.kvrouter.examples.loadgen;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A test worker with a scripted stream: answers after {@code ttftMillis}, then one content chunk every
 * {@code gapMillis}, then usage with a fixed {@code cachedTokens}, like vLLM (chat streams start with an empty
 * role chunk). Serves vLLM-named counters on {@code /metrics} that follow what it served, and counts
 * {@code /reset_prefix_cache} calls (refusing as many as told). Binds 127.0.0.1.
 */
final class ScriptedWorker implements AutoCloseable {

  static {
    System.setProperty("sun.net.httpserver.nodelay", "true");
  }

  private static final ObjectMapper JSON = new ObjectMapper();

  final String name;
  volatile long ttftMillis;
  final long gapMillis;
  final int cachedTokens;
  final List<String> policyHeaders = new CopyOnWriteArrayList<>();
  final AtomicInteger resets = new AtomicInteger();
  /** Resets still to refuse with 400, as vLLM refuses one while requests hold blocks. */
  final AtomicInteger refuseResets = new AtomicInteger();
  private final AtomicInteger running = new AtomicInteger();
  private final AtomicLong promptTokens = new AtomicLong();
  private final AtomicLong hits = new AtomicLong();
  private final AtomicLong served = new AtomicLong();
  private final HttpServer server;
  private final ExecutorService pool;

  ScriptedWorker(String name, long ttftMillis, long gapMillis, int cachedTokens) throws IOException {
    this.name = name;
    this.ttftMillis = ttftMillis;
    this.gapMillis = gapMillis;
    this.cachedTokens = cachedTokens;
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 128);
    pool = Executors.newFixedThreadPool(32);
    server.setExecutor(pool);
    server.createContext("/", this::handle);
    server.start();
  }

  URI uri() {
    return URI.create("http://127.0.0.1:" + server.getAddress().getPort());
  }

  WorkerTarget target() {
    return WorkerTarget.of(name, uri());
  }

  private void handle(HttpExchange ex) throws IOException {
    try (ex) {
      switch (ex.getRequestURI().getPath()) {
        case "/metrics" -> metrics(ex);
        case "/reset_prefix_cache" -> {
          resets.incrementAndGet();
          ex.sendResponseHeaders(refuseResets.getAndUpdate(n -> Math.max(0, n - 1)) > 0 ? 400 : 200, -1);
        }
        case "/v1/completions" -> stream(ex, false);
        case "/v1/chat/completions" -> stream(ex, true);
        default -> ex.sendResponseHeaders(404, -1);
      }
    }
  }

  private void metrics(HttpExchange ex) throws IOException {
    String labels = "engine=\"0\",model_name=\"odd } name\"";
    String text = "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        + "# TYPE vllm:num_requests_running gauge\n"
        + "vllm:num_requests_running{" + labels + "} " + running.get() + ".0\n"
        + "vllm:num_requests_waiting{" + labels + "} 0.0\n"
        + "vllm:prompt_tokens_total{" + labels + "} " + promptTokens.get() + ".0\n"
        + "vllm:prefix_cache_queries_total{" + labels + "} " + promptTokens.get() + ".0\n"
        + "vllm:prefix_cache_hits_total{" + labels + "} " + hits.get() + ".0\n"
        + "vllm:request_success_total{" + labels + ",finished_reason=\"length\"} " + served.get() + ".0\n";
    byte[] b = text.getBytes(StandardCharsets.UTF_8);
    ex.sendResponseHeaders(200, b.length);
    ex.getResponseBody().write(b);
  }

  private void stream(HttpExchange ex, boolean chat) throws IOException {
    running.incrementAndGet();
    try {
      JsonNode req = JSON.readTree(ex.getRequestBody());
      policyHeaders.add(String.valueOf(ex.getRequestHeaders().getFirst("x-kvrouter-policy")));
      int prompt = chat ? words(req.path("messages")) : req.path("prompt").size();
      int tokens = req.path("max_tokens").asInt();
      int cached = Math.min(cachedTokens, prompt);
      promptTokens.addAndGet(prompt);
      hits.addAndGet(cached);
      ex.getResponseHeaders().set("content-type", "text/event-stream");
      ex.getResponseHeaders().set("x-kvrouter-served-by", name);
      ex.getResponseHeaders().set("x-kvrouter-decision", "d-" + served.incrementAndGet());
      ex.sendResponseHeaders(200, 0);
      OutputStream out = ex.getResponseBody();
      out.flush(); // headers now, as vLLM does; the JDK server would hold them until the first body write
      if (chat) { // vLLM's first chat chunk carries the role and no content: not a token
        event(out, "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":null}");
      }
      sleep(ttftMillis);
      for (int i = 0; i < tokens; i++) {
        if (i > 0) {
          sleep(gapMillis);
        }
        event(out, chat
            ? "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\" t" + i + "\"}}],\"usage\":null}"
            : "{\"choices\":[{\"index\":0,\"text\":\" t" + i + "\"}],\"usage\":null}");
      }
      event(out, String.format(Locale.ROOT, "{\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,"
          + "\"total_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":%d}}}", prompt, tokens, prompt + tokens,
          cached));
      event(out, "[DONE]");
    } finally {
      running.decrementAndGet();
    }
  }

  private static int words(JsonNode messages) {
    int n = 0;
    for (JsonNode m : messages) {
      n += m.path("content").asText().split(" ").length;
    }
    return n;
  }

  private static void event(OutputStream out, String data) throws IOException {
    out.write(("data: " + data + "\n\n").getBytes(StandardCharsets.UTF_8));
    out.flush();
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void close() {
    server.stop(0);
    pool.shutdownNow();
  }
}
