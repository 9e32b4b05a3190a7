package dev.kvrouter.examples.loadgen;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.report.AbReport;
import dev.kvrouter.examples.report.PolicyResult;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.fleet.SimWorker;
import dev.kvrouter.examples.sim.http.PromptEncoder;
import dev.kvrouter.examples.sim.timing.Presets;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(60)
class AbRunnerTest {

  private static final String SIM_MODEL = "meta-llama/Llama-3.1-8B-Instruct";
  private static final HttpClient CLIENT = HttpClient.newHttpClient();

  @Test
  void runsEveryWorkloadUnderEveryPolicyAndWritesTheReport(@TempDir Path out) throws Exception {
    List<String> prepared = new ArrayList<>();
    ByteArrayOutputStream progress = new ByteArrayOutputStream();
    try (ScriptedWorker w = new ScriptedWorker("w1", 5, 2, 32);
        LoadGenerator gen = new LoadGenerator(LoadConfig.defaults(w.uri(), "test/model")
            .withSampleInterval(Duration.ofMillis(50)).withMaxRequests(12))) {
      AbRunner.Settings settings = new AbRunner.Settings(List.of("kv_aware", "round_robin"), "kv_aware",
          "round_robin", true, 16, true, Duration.ZERO, Duration.ofSeconds(5), out, Map.of("command", "test"));
      PolicyPreparer preparer = (policy, workload, ctx) -> {
        prepared.add(policy + "@" + workload.name() + ":" + workload.size());
        return ctx.routerSnapshot(JvmProbes.process()).build();
      };
      AbReport report = new AbRunner(gen, List.of(w.target()), settings, preparer,
          new PrintStream(progress, true, StandardCharsets.UTF_8))
          .run(List.of("unique:count=20,rate=200,prompt=64,output=3",
              "system-prompt:count=8,rate=200,prompt=64,output=3,sharing=0|0.5"));

      assertThat(prepared).containsExactly("kv_aware@unique:12", "round_robin@unique:12",
          "kv_aware@system-prompt:8", "round_robin@system-prompt:8", "kv_aware@system-prompt:8",
          "round_robin@system-prompt:8");
      // the policy travelled in the trusted header, one run each, in order
      assertThat(w.policyHeaders).hasSize(2 * 12 + 4 * 8);
      assertThat(w.policyHeaders.subList(0, 12)).containsOnly("kv_aware");
      assertThat(w.policyHeaders.subList(12, 24)).containsOnly("round_robin");
      assertThat(w.resets.get()).isEqualTo(6); // before every run
      assertThat(report.workloads()).extracting(s -> s.spec()).containsExactly(
          "unique:count=20,rate=200,prompt=64,output=3", "system-prompt:count=8,rate=200,prompt=64,output=3,sharing=0",
          "system-prompt:count=8,rate=200,prompt=64,output=3,sharing=0.5");
      assertThat(report.workloads().get(1).idealTokenShare()).isZero();
      assertThat(report.workloads().get(2).idealTokenShare()).isGreaterThan(0.05);
      for (var section : report.workloads()) {
        assertThat(section.results()).extracting(PolicyResult::policy).containsExactly("kv_aware", "round_robin");
        for (PolicyResult r : section.results()) {
          assertThat(r.counts().completed()).isEqualTo(section.requests());
          assertThat(r.cache().source()).isEqualTo("vllm");
          assertThat(r.cache().idealShare()).isEqualTo(section.idealTokenShare());
          assertThat(r.router().cpuSeconds()).isNotNull();
        }
      }
    }
    JsonNode json = new ObjectMapper().readTree(out.resolve("report.json").toFile());
    assertThat(json.path("workloads")).hasSize(3);
    assertThat(json.path("meta").path("command").asText()).isEqualTo("test");
    assertThat(json.path("meta").path("blockSize").asInt()).isEqualTo(16);
    assertThat(Files.readString(out.resolve("report.md"))).contains("| kv_aware (ours) |");
    assertThat(out.resolve("charts/prefill-saved.png")).isNotEmptyFile();
    assertThat(progress.toString(StandardCharsets.UTF_8)).contains("round_robin  TTFT p50");
  }

  @Test
  void theWarmUpGoesOnceUnderOursOrOnceUnderEveryPolicyInRunOrder(@TempDir Path out) throws Exception {
    for (boolean everyPolicy : List.of(false, true)) {
      try (ScriptedWorker w = new ScriptedWorker("w1", 5, 2, 32);
          LoadGenerator gen = new LoadGenerator(LoadConfig.defaults(w.uri(), "test/model")
              .withSampleInterval(Duration.ofMillis(50)))) {
        AbRunner.Settings settings = new AbRunner.Settings(List.of("round_robin", "kv_aware", "cache_only"),
            "kv_aware", "round_robin", true, 16, true, Duration.ZERO, Duration.ofSeconds(5),
            out.resolve("every-" + everyPolicy), Map.of(), 4, null);
        AbReport report = new AbRunner(gen, List.of(w.target()),
            everyPolicy ? settings.warmingEveryPolicy() : settings, PolicyPreparer.none(),
            new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8))
            .run(List.of("unique:count=6,rate=200,prompt=64,output=3"));

        List<String> warmUp = everyPolicy
            ? List.of("round_robin", "round_robin", "round_robin", "round_robin", "kv_aware", "kv_aware", "kv_aware",
                "kv_aware", "cache_only", "cache_only", "cache_only", "cache_only")
            : List.of("kv_aware", "kv_aware", "kv_aware", "kv_aware");
        assertThat(w.policyHeaders).as("every policy: " + everyPolicy).hasSize(warmUp.size() + 3 * 6);
        for (int p = 0; p < warmUp.size(); p += 4) { // a pass's 4 requests are sent concurrently: order within
          assertThat(w.policyHeaders.subList(p, p + 4)).containsOnly(warmUp.get(p));
        }
        assertThat(w.resets.get()).as("the caches are reset before each measured run only").isEqualTo(3);
        for (PolicyResult r : report.workloads().get(0).results()) {
          assertThat(r.counts().completed()).as("measured requests, the warm-up not among them").isEqualTo(6);
        }
      }
    }
  }

  @Test
  void oneSeedFlagSeedsSpecsWithoutTheirOwn() {
    assertThat(AbRunner.withSeed("rag", "5")).isEqualTo("rag:seed=5");
    assertThat(AbRunner.withSeed("rag:count=3", "5")).isEqualTo("rag:count=3,seed=5");
    assertThat(AbRunner.withSeed("rag:seed=9,count=3", "5")).isEqualTo("rag:seed=9,count=3");
  }
  @Test
  void resetsTheCachesOnlyOnceTheWorkersAreIdle(@TempDir Path out) throws Exception {
    ExecutorService writer = Executors.newFixedThreadPool(2);
    EngineConfig config = EngineConfig.fromPreset(Presets.LLAMA_3_1_8B_H100, 16).numGpuBlocks(4096).seed(3).build();
    try (SimWorker worker = SimWorker.start(new SimWorker.Spec("w1", config, Presets.LLAMA_3_1_8B_H100.timingModel(),
        0.9, "127.0.0.1", 0, null, null, null), PromptEncoder.tokenIdsOnly(), writer)) {
      String base = "http://127.0.0.1:" + worker.httpPort();
      String earlier = completion(ids(320, 7), 1);
      // an earlier run leaves this prompt in the cache ...
      CLIENT.send(post(base, earlier), HttpResponse.BodyHandlers.ofString());
      // ... and one of its requests is still decoding when the next policy's run starts: a reset now is refused
      CompletableFuture<HttpResponse<String>> busy = CLIENT.sendAsync(post(base, completion(ids(20, 90001), 400)),
          HttpResponse.BodyHandlers.ofString());
      Thread.sleep(300);
      assertThat(busy).isNotDone();

      ByteArrayOutputStream progress = new ByteArrayOutputStream();
      try (LoadGenerator gen = new LoadGenerator(LoadConfig.defaults(URI.create(base), SIM_MODEL)
          .withSampleInterval(Duration.ofMillis(50)))) {
        AbRunner.Settings settings = new AbRunner.Settings(List.of("round_robin"), "round_robin", "round_robin",
            false, 16, true, Duration.ZERO, Duration.ofSeconds(30), out, Map.of());
        new AbRunner(gen, List.of(WorkerTarget.of("w1", URI.create(base))), settings, PolicyPreparer.none(),
            new PrintStream(progress, true, StandardCharsets.UTF_8))
            .run(List.of("unique:count=3,rate=100,prompt=64,output=2,format=tokens"));
      }
      assertThat(busy.join().statusCode()).isEqualTo(200);

      HttpResponse<String> again = CLIENT.send(post(base, earlier), HttpResponse.BodyHandlers.ofString());
      int cached = new ObjectMapper().readTree(again.body()).path("usage").path("prompt_tokens_details")
          .path("cached_tokens").asInt();
      assertThat(cached).as("cached tokens of a prompt from before the policy's run").isZero();
      assertThat(progress.toString(StandardCharsets.UTF_8)).doesNotContain("warning");
    } finally {
      writer.shutdownNow();
    }
  }

  @Test
  void aRefusedResetIsAskedAgain(@TempDir Path out) throws Exception {
    try (ScriptedWorker w = new ScriptedWorker("w1", 1, 1, 0);
        LoadGenerator gen = new LoadGenerator(LoadConfig.defaults(w.uri(), "test/model")
            .withSampleInterval(Duration.ofMillis(50)))) {
      w.refuseResets.set(2);
      ByteArrayOutputStream progress = new ByteArrayOutputStream();
      new AbRunner(gen, List.of(w.target()), settings(out), PolicyPreparer.none(),
          new PrintStream(progress, true, StandardCharsets.UTF_8))
          .run(List.of("unique:count=2,rate=100,prompt=32,output=2"));
      assertThat(w.resets.get()).isEqualTo(3);
      assertThat(progress.toString(StandardCharsets.UTF_8)).contains("w1 /reset_prefix_cache answered 400 (attempt 2)");
    }
  }

  @Test
  void aResetThatNeverTakesStopsTheAb(@TempDir Path out) throws Exception {
    try (ScriptedWorker w = new ScriptedWorker("w1", 1, 1, 0);
        LoadGenerator gen = new LoadGenerator(LoadConfig.defaults(w.uri(), "test/model")
            .withSampleInterval(Duration.ofMillis(50)))) {
      w.refuseResets.set(Integer.MAX_VALUE);
      AbRunner runner = new AbRunner(gen, List.of(w.target()), settings(out), PolicyPreparer.none(),
          new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8));
      assertThatThrownBy(() -> runner.run(List.of("unique:count=2,rate=100,prompt=32,output=2")))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("w1 /reset_prefix_cache answered 400")
          .hasMessageContaining("--reset-caches false");
      assertThat(w.resets.get()).isEqualTo(5);
      assertThat(w.policyHeaders).as("requests sent on a cache that was not reset").isEmpty();
    }
  }

  private static AbRunner.Settings settings(Path out) {
    return new AbRunner.Settings(List.of("kv_aware"), "kv_aware", "kv_aware", true, 16, true, Duration.ZERO,
        Duration.ofSeconds(5), out, Map.of());
  }

  private static String ids(int n, int start) {
    return IntStream.range(0, n).mapToObj(i -> Integer.toString(start + i * 3)).collect(Collectors.joining(","));
  }

  private static String completion(String ids, int maxTokens) {
    return "{\"model\":\"" + SIM_MODEL + "\",\"prompt\":[" + ids + "],\"max_tokens\":" + maxTokens + "}";
  }

  private static HttpRequest post(String base, String body) {
    return HttpRequest.newBuilder(URI.create(base + "/v1/completions")).timeout(Duration.ofSeconds(60))
        .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build();
  }
}
