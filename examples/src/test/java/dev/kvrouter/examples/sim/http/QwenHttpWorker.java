package dev.kvrouter.examples.sim.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.fleet.SimWorker;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.extproc.decision.UsageScanner;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * One simulated worker over real HTTP with Qwen3's tokenizer and chat template, for the chat-like endpoints' tests:
 * requests, its vLLM counters, SSE events and what the router's {@link UsageScanner} reads of an answer. Registered
 * as a static extension, it serves the test class's tests and stops after them.
 */
final class QwenHttpWorker implements BeforeAllCallback, AfterAllCallback {

  static final ObjectMapper JSON = new ObjectMapper();
  static final int BS = 16;
  private static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  final TestEncoders encoders = new TestEncoders();
  private final String name;
  private final EngineConfig config;
  private final ScriptedOutput scripted;
  private ExecutorService writer;
  private SimWorker worker;

  QwenHttpWorker(String name, long seed) {
    this(name, seed, null);
  }

  /** A worker whose seeded requests get {@code scripted}'s answers ({@code --output-tokens workload}). */
  QwenHttpWorker(String name, long seed, ScriptedOutput scripted) {
    this.name = name;
    this.scripted = scripted;
    // Qwen3's ids go past the Llama preset's vocabulary: not checked
    this.config = EngineConfig.fromPreset(Presets.LLAMA_3_1_8B_H100, BS).numGpuBlocks(2048).seed(seed)
        .vocabSize(0).build();
  }

  @Override
  public void beforeAll(ExtensionContext context) throws Exception {
    writer = Executors.newFixedThreadPool(2);
    worker = SimWorker.start(new SimWorker.Spec(name, config, Presets.LLAMA_3_1_8B_H100.timingModel(), null,
        "127.0.0.1", 0, null, null, scripted), encoders.get("qwen3"), writer);
  }

  @Override
  public void afterAll(ExtensionContext context) throws Exception {
    if (worker != null) {
      worker.close();
    }
    if (writer != null) {
      writer.shutdownNow();
      writer.awaitTermination(5, TimeUnit.SECONDS);
    }
    encoders.close();
  }

  String model() {
    return config.model();
  }

  PipelinePromptEncoder encoder() {
    return encoders.get("qwen3");
  }

  HttpResponse<String> post(String path, JsonNode body) throws Exception {
    return CLIENT.send(request(path, body), HttpResponse.BodyHandlers.ofString());
  }

  /** A request whose answer is read as it arrives. */
  <T> CompletableFuture<HttpResponse<T>> postAsync(String path, JsonNode body, HttpResponse.BodyHandler<T> handler)
      throws Exception {
    return CLIENT.sendAsync(request(path, body), handler);
  }

  private HttpRequest request(String path, JsonNode body) throws Exception {
    return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + worker.httpPort() + path))
        .timeout(Duration.ofSeconds(30)).header("content-type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(body))).build();
  }

  /** The simulated engine, for its lifecycle. */
  SimWorker worker() {
    return worker;
  }

  /** The worker's value of a vLLM counter. */
  long metric(String name) throws Exception {
    String page = CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + worker.httpPort()
        + "/metrics")).GET().build(), HttpResponse.BodyHandlers.ofString()).body();
    String prefix = name + "{engine=\"0\",model_name=\"" + model() + "\"} ";
    for (String line : page.split("\n")) {
      if (line.startsWith(prefix)) {
        return (long) Double.parseDouble(line.substring(prefix.length()));
      }
    }
    throw new AssertionError("no " + name + " on /metrics");
  }

  /** The events of an SSE body of {@code event:}/{@code data:} pairs, each checked to name its data's type. */
  static List<JsonNode> events(String body) throws Exception {
    List<JsonNode> events = new ArrayList<>();
    for (String frame : body.split("\n\n")) {
      String[] lines = frame.split("\n");
      assertThat(lines).hasSize(2);
      assertThat(lines[0]).startsWith("event: ");
      assertThat(lines[1]).startsWith("data: ");
      JsonNode e = JSON.readTree(lines[1].substring(6));
      assertThat(e.path("type").asText()).isEqualTo(lines[0].substring(7));
      events.add(e);
    }
    return events;
  }

  static List<String> types(List<JsonNode> events) {
    return events.stream().map(e -> e.path("type").asText()).toList();
  }

  /** What the router's truth check reads of a whole answer. */
  static UsageScanner scanned(String body) {
    UsageScanner scanner = new UsageScanner();
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    scanner.feed(bytes, 0, bytes.length);
    return scanner;
  }
}
