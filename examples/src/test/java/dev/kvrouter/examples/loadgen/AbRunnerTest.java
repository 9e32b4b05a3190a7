package dev.kvrouter.examples.loadgen;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.report.AbReport;
import dev.kvrouter.examples.report.PolicyResult;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(60)
class AbRunnerTest {

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
  void oneSeedFlagSeedsSpecsWithoutTheirOwn() {
    assertThat(AbRunner.withSeed("rag", "5")).isEqualTo("rag:seed=5");
    assertThat(AbRunner.withSeed("rag:count=3", "5")).isEqualTo("rag:count=3,seed=5");
    assertThat(AbRunner.withSeed("rag:seed=9,count=3", "5")).isEqualTo("rag:seed=9,count=3");
  }
}
