package dev.kvrouter.examples.sim.fleet;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.engine.EngineStats;
import dev.kvrouter.examples.sim.http.FaultControl;
import dev.kvrouter.examples.sim.http.PromptEncoder;
import dev.kvrouter.examples.sim.timing.Presets;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** One simulated worker over real HTTP: the OpenAI API, usage truth, metrics, admin faults, crash. */
@Timeout(120)
class SimWorkerHttpTest {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String MODEL = "meta-llama/Llama-3.1-8B-Instruct";
  private static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private static ExecutorService writer;
  private static SimWorker worker;
  private static String base;

  @BeforeAll
  static void start() throws Exception {
    writer = Executors.newFixedThreadPool(2);
    EngineConfig config = EngineConfig.fromPreset(Presets.LLAMA_3_1_8B_H100, 16).numGpuBlocks(2048)
        .adapters(List.of("alice-lora")).seed(11).build();
    worker = SimWorker.start(new SimWorker.Spec("w-http", config, Presets.LLAMA_3_1_8B_H100.timingModel(), 0.9,
        "127.0.0.1", 0, new SimWorker.Events(0, 0, "", null), null, null), PromptEncoder.tokenIdsOnly(), writer);
    base = "http://127.0.0.1:" + worker.httpPort();
  }

  @AfterAll
  static void stop() throws Exception {
    worker.close();
    writer.shutdownNow();
    writer.awaitTermination(5, TimeUnit.SECONDS);
  }

  private static String ids(int n, int start) {
    return IntStream.range(0, n).mapToObj(i -> Integer.toString(start + i * 3)).collect(Collectors.joining(","));
  }

  private static HttpResponse<String> post(String path, String body) throws Exception {
    return CLIENT.send(HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(30))
        .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private static HttpResponse<String> get(String path) throws Exception {
    return CLIENT.send(HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(30)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private static EngineStats stats() throws Exception {
    return worker.engine().stats().get(5, TimeUnit.SECONDS);
  }

  @Test
  void repeatedPromptReportsTheEnginesCachedTokens() throws Exception {
    String body = "{\"model\":\"" + MODEL + "\",\"prompt\":[" + ids(300, 7) + "],\"max_tokens\":4}";
    HttpResponse<String> first = post("/v1/completions", body);
    assertThat(first.statusCode()).isEqualTo(200);
    assertThat(first.headers().firstValue("x-kvrouter-served-by")).hasValue("w-http");
    JsonNode u1 = JSON.readTree(first.body()).get("usage");
    assertThat(u1.get("prompt_tokens").asInt()).isEqualTo(300);
    assertThat(u1.get("completion_tokens").asInt()).isEqualTo(4);
    assertThat(u1.get("total_tokens").asInt()).isEqualTo(304);
    assertThat(u1.get("prompt_tokens_details").get("cached_tokens").asInt()).isZero();

    long cachedBefore = stats().cachedPromptTokens();
    HttpResponse<String> second = post("/v1/completions", body);
    JsonNode r2 = JSON.readTree(second.body());
    int cached = r2.get("usage").get("prompt_tokens_details").get("cached_tokens").asInt();
    // vLLM serves all full blocks but the one holding the last prompt token: 18 of the 300 tokens' 19 blocks
    assertThat(cached).isEqualTo(288);
    assertThat(stats().cachedPromptTokens() - cachedBefore).isEqualTo(cached); // the truth counter agrees
    JsonNode choice = r2.get("choices").get(0);
    assertThat(choice.get("finish_reason").asText()).isEqualTo("length");
    assertThat(choice.get("text").asText()).isEqualTo(JSON.readTree(first.body()).get("choices").get(0)
        .get("text").asText()); // same prompt, same output, like greedy decoding
    assertThat(r2.get("object").asText()).isEqualTo("text_completion");
    assertThat(r2.get("id").asText()).startsWith("cmpl-");
  }

  @Test
  void streamingSendsOneChunkPerTokenThenUsageThenDone() throws Exception {
    String body = "{\"model\":\"" + MODEL + "\",\"prompt\":[" + ids(100, 5000) + "],\"max_tokens\":6,"
        + "\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
    HttpResponse<java.util.stream.Stream<String>> r = CLIENT.send(HttpRequest.newBuilder(
        URI.create(base + "/v1/completions")).POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofLines());
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.headers().firstValue("content-type").orElse("")).startsWith("text/event-stream");
    assertThat(r.headers().firstValue("x-kvrouter-served-by")).hasValue("w-http");
    List<String> data = r.body().filter(l -> l.startsWith("data: ")).map(l -> l.substring(6)).toList();
    assertThat(data).hasSize(8);
    assertThat(data.get(7)).isEqualTo("[DONE]");
    for (int i = 0; i < 6; i++) {
      JsonNode c = JSON.readTree(data.get(i)).get("choices").get(0);
      assertThat(c.get("text").asText()).isNotEmpty();
      assertThat(c.get("finish_reason").isNull()).isEqualTo(i < 5);
    }
    JsonNode usage = JSON.readTree(data.get(6));
    assertThat(usage.get("choices")).isEmpty();
    assertThat(usage.get("usage").get("completion_tokens").asInt()).isEqualTo(6);
    assertThat(usage.get("usage").get("prompt_tokens").asInt()).isEqualTo(100);
  }

  @Test
  void streamingChunksArriveAsTheEngineProducesThem() throws Exception {
    // A slowed-down worker takes ~325 ms per decode step, so the stream must spread over time. (If the engine
    // thread were starved, late steps would catch up in a burst: the margin below allows for ~800 ms of that.)
    EngineConfig config = EngineConfig.fromPreset(Presets.LLAMA_3_1_8B_H100, 16).numGpuBlocks(256).seed(3).build();
    try (SimWorker slow = SimWorker.start(new SimWorker.Spec("w-slow", config,
        Presets.LLAMA_3_1_8B_H100.timingModel(), null, "127.0.0.1", 0, null,
        new FaultControl.Update(null, null, null, null, 50.0, null), null), PromptEncoder.tokenIdsOnly(),
        writer)) {
      String body = "{\"model\":\"" + MODEL + "\",\"prompt\":[1,2,3],\"max_tokens\":5,\"stream\":true}";
      long start = System.nanoTime();
      List<Long> at = new ArrayList<>();
      HttpResponse<InputStream> r = CLIENT.send(HttpRequest.newBuilder(
          URI.create("http://127.0.0.1:" + slow.httpPort() + "/v1/completions"))
          .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofInputStream());
      try (var lines = new java.io.BufferedReader(new java.io.InputStreamReader(r.body()))) {
        String l;
        while ((l = lines.readLine()) != null) {
          if (l.startsWith("data: ")) {
            at.add(System.nanoTime() - start);
          }
        }
      }
      assertThat(at).hasSize(6);
      assertThat(at.get(4) - at.get(0)).isGreaterThan(500_000_000L); // 4 decode steps of ~325 ms
    }
  }

  @Test
  void batchedPromptsGetOneChoiceEachAndSummedUsage() throws Exception {
    String body = "{\"model\":\"" + MODEL + "\",\"prompt\":[[" + ids(20, 1) + "],[" + ids(40, 9000)
        + "]],\"max_tokens\":3}";
    JsonNode r = JSON.readTree(post("/v1/completions", body).body());
    assertThat(r.get("choices")).hasSize(2);
    assertThat(r.get("choices").get(1).get("index").asInt()).isEqualTo(1);
    assertThat(r.get("usage").get("prompt_tokens").asInt()).isEqualTo(60);
    assertThat(r.get("usage").get("completion_tokens").asInt()).isEqualTo(6);
  }

  @Test
  void adaptersAreServedAndListed() throws Exception {
    HttpResponse<String> r = post("/v1/completions",
        "{\"model\":\"alice-lora\",\"prompt\":[1,2,3],\"max_tokens\":1}");
    assertThat(r.statusCode()).isEqualTo(200);
    JsonNode models = JSON.readTree(get("/v1/models").body()).get("data");
    assertThat(models).hasSize(2);
    assertThat(models.get(0).get("id").asText()).isEqualTo(MODEL);
    assertThat(models.get(1).get("id").asText()).isEqualTo("alice-lora");
    assertThat(models.get(1).get("parent").asText()).isEqualTo(MODEL);
  }

  @Test
  void badRequestsGetOpenAiErrors() throws Exception {
    HttpResponse<String> unknown = post("/v1/completions", "{\"model\":\"nope\",\"prompt\":[1]}");
    assertThat(unknown.statusCode()).isEqualTo(404);
    assertThat(JSON.readTree(unknown.body()).get("error").get("message").asText()).contains("nope");
    assertThat(unknown.headers().firstValue("x-kvrouter-served-by")).hasValue("w-http");

    HttpResponse<String> tooLong = post("/v1/completions", "{\"model\":\"" + MODEL + "\",\"prompt\":[1,2],"
        + "\"max_tokens\":200000}");
    assertThat(tooLong.statusCode()).isEqualTo(400);
    assertThat(JSON.readTree(tooLong.body()).get("error").get("message").asText())
        .startsWith("This model's maximum context length is 131072 tokens.");

    assertThat(post("/v1/completions", "{not json").statusCode()).isEqualTo(400);
    assertThat(post("/v1/completions", "{\"model\":\"" + MODEL + "\",\"prompt\":\"text\"}").statusCode())
        .isEqualTo(400); // no tokenizer on this worker
    assertThat(post("/v1/completions", "{\"model\":\"" + MODEL + "\",\"prompt\":[1],\"n\":2}").statusCode())
        .isEqualTo(400);
    assertThat(post("/v1/completions", "{\"model\":\"" + MODEL + "\",\"prompt\":[1],\"stream_options\":{}}")
        .statusCode()).isEqualTo(400);
    assertThat(post("/v1/chat/completions", "{\"model\":\"" + MODEL
        + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}").statusCode()).isEqualTo(501);
    assertThat(get("/v1/completions").statusCode()).isEqualTo(405);
    assertThat(get("/nope").statusCode()).isEqualTo(404);
  }

  @Test
  void metricsUseVllmNames() throws Exception {
    post("/v1/completions", "{\"model\":\"" + MODEL + "\",\"prompt\":[" + ids(50, 3) + "],\"max_tokens\":2}");
    String m = get("/metrics").body();
    String labels = "{engine=\"0\",model_name=\"" + MODEL + "\"}";
    assertThat(m).contains("vllm:num_requests_running" + labels)
        .contains("vllm:num_requests_waiting" + labels)
        .contains("vllm:kv_cache_usage_perc" + labels)
        .contains("vllm:prefix_cache_queries_total" + labels)
        .contains("vllm:prefix_cache_hits_total" + labels)
        .contains("vllm:prompt_tokens_total" + labels)
        .contains("vllm:generation_tokens_total" + labels)
        .contains("vllm:time_to_first_token_seconds_bucket{engine=\"0\",model_name=\"" + MODEL + "\",le=\"+Inf\"}")
        .contains("vllm:time_to_first_token_seconds_count" + labels)
        .contains("vllm:cache_config_info{block_size=\"16\"")
        .contains("num_gpu_blocks=\"2048\"");
    EngineStats s = stats();
    assertThat(m).contains("vllm:prompt_tokens_total" + labels + " " + (double) s.promptTokens());
  }

  /**
   * As vLLM: {@code /metrics} is the whole page whatever the query (prometheus-fastapi-instrumentator's handler),
   * {@code /metrics/} keeps the samples named by {@code name[]} (prometheus_client's app), HELP and TYPE with them.
   */
  @Test
  void metricsUnderTheMountedAppKeepTheNamedSamplesOnly() throws Exception {
    String query = "?name%5B%5D=vllm%3Anum_requests_running&name%5B%5D=vllm%3Acache_config_info"
        + "&name%5B%5D=vllm%3Aprompt_tokens_total&name%5B%5D=sglang%3Atoken_usage";
    String whole = get("/metrics" + query).body();
    assertThat(whole).as("the instrumentator's handler ignores the query")
        .contains("vllm:num_requests_waiting").contains("vllm:time_to_first_token_seconds_bucket");
    String filtered = get("/metrics/" + query).body();
    assertThat(filtered.lines().filter(l -> !l.startsWith("#")).map(l -> l.split("[{ ]", 2)[0]))
        .containsExactly("vllm:num_requests_running", "vllm:prompt_tokens_total", "vllm:cache_config_info");
    assertThat(filtered).contains("# TYPE vllm:num_requests_running gauge\n")
        .contains("# HELP vllm:prompt_tokens Number of prefill tokens processed.\n")
        .doesNotContain("vllm:num_requests_waiting");
    assertThat(get("/metrics/").body()).as("no parameters: the whole page").isEqualTo(get("/metrics").body());
  }

  @Test
  void clientDisconnectAbortsTheRequest() throws Exception {
    EngineStats before = stats();
    String body = "{\"model\":\"" + MODEL + "\",\"prompt\":[1,2,3,4],\"max_tokens\":5000,\"stream\":true}";
    HttpResponse<InputStream> r = CLIENT.send(HttpRequest.newBuilder(URI.create(base + "/v1/completions"))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofInputStream());
    InputStream in = r.body();
    assertThat(in.read(new byte[64])).isPositive();
    in.close();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    EngineStats now = stats();
    while (now.failedRequests() == before.failedRequests() && System.nanoTime() < deadline) {
      Thread.sleep(50);
      now = stats();
    }
    assertThat(now.failedRequests()).isEqualTo(before.failedRequests() + 1);
    assertThat(now.generationTokens() - before.generationTokens()).isLessThan(5000);
  }
}
