package dev.kvrouter.examples.report;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import java.awt.image.BufferedImage;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ReportRenderingTest {

  static AbReport report() {
    List<WorkloadResult> sections = new ArrayList<>();
    for (String spec : List.of("system-prompt:count=20", "unique:count=20")) {
      Workload w = WorkloadCatalog.create(spec);
      var ideal = w.idealReuse(16);
      List<PolicyResult> results = List.of(
          PolicyResult.summarize(RunDataFixtures.run("kv_aware", 20, 600), ideal),
          PolicyResult.summarize(RunDataFixtures.run("round_robin", 40, 100), ideal),
          PolicyResult.summarize(RunDataFixtures.run("least_load", 30, 100), ideal));
      sections.add(WorkloadResult.of(spec, w, ideal, results));
    }
    return new AbReport(AbReport.SCHEMA, "2026-01-01T00:00:00Z", Map.of("command", "AbRunner --test"), "kv_aware",
        "round_robin", sections);
  }

  @Test
  void jsonHoldsEveryFigureAndTheIdealBesideEachResult(@TempDir Path dir) throws Exception {
    AbReport report = report();
    Path file = dir.resolve("r/report.json");
    ReportJson.write(report, file);
    JsonNode root = new ObjectMapper().readTree(file.toFile());
    assertThat(root.path("schema").asText()).isEqualTo("kvrouter.ab-report/1");
    assertThat(root.path("ours").asText()).isEqualTo("kv_aware");
    JsonNode w = root.path("workloads").get(0);
    for (String f : List.of("spec", "name", "params", "requests", "contentTokens", "spanSeconds", "idealTokenShare",
        "idealBlockShare", "ideal", "results")) {
      assertThat(w.has(f)).as(f).isTrue();
    }
    assertThat(w.path("params").path("count").asInt()).isEqualTo(20);
    JsonNode r = w.path("results").get(0);
    for (String f : List.of("policy", "counts", "errors", "durationSeconds", "throughput", "ttftMs", "itlMs", "tpotMs",
        "e2eMs", "sendLagMs", "cache", "balance", "router", "ttftCdf", "load", "notes", "sessions")) {
      assertThat(r.has(f)).as(f).isTrue();
    }
    for (String f : List.of("p50", "p90", "p95", "p99", "mean", "max", "count")) {
      assertThat(r.path("ttftMs").has(f)).as(f).isTrue();
    }
    assertThat(r.path("cache").path("idealShare").asDouble()).isEqualTo(w.path("idealTokenShare").asDouble());
    assertThat(r.path("cache").has("servedVsIdeal")).isTrue();
    assertThat(r.path("balance").path("requestImbalance").asDouble()).isEqualTo(1.5);
    assertThat(r.path("router").path("cpuSeconds").asDouble()).isEqualTo(0.6);
    assertThat(r.path("load").path("series").path("a").get(0).size()).isEqualTo(3);
    assertThat(ReportJson.read(file).workloads().get(1).results().get(2).policy()).isEqualTo("least_load");
  }

  @Test
  void closedLoopRunsCarryTheirSessionsAsAStructuredField(@TempDir Path dir) throws Exception {
    Workload w = WorkloadCatalog.create("multi-turn:format=tokens,sessions=3,turns=3");
    RunData open = RunDataFixtures.run("round_robin", 40, 100);
    Sessions held = new Sessions(true, 6, 4, 2.0, 0.5, 0.9, 2, 1, new Sessions.StreamedAnswers(8, 1, 0));
    RunData closed = new RunData("kv_aware", open.workers(), open.requests(), open.itlMicros(), open.durationMicros(),
        open.counters(), open.load(), open.loadIntervalMicros(), open.routerBefore(), open.routerAfter(),
        open.routerPeakHeapBytes(), open.overhead(), open.maxInFlight(), open.notes(), held);
    AbReport report = new AbReport(AbReport.SCHEMA, "2026-01-01T00:00:00Z", Map.of(), "kv_aware", "round_robin",
        List.of(WorkloadResult.of("multi-turn", w, w.idealReuse(16), List.of(
            PolicyResult.summarize(closed, w.idealReuse(16)), PolicyResult.summarize(open, w.idealReuse(16))))));
    Path file = dir.resolve("report.json");
    ReportJson.write(report, file);
    JsonNode results = new ObjectMapper().readTree(file.toFile()).path("workloads").get(0).path("results");
    JsonNode s = results.get(0).path("sessions");
    assertThat(s.path("dependentTurns").asLong()).isEqualTo(6);
    assertThat(s.path("heldBack").asLong()).isEqualTo(4);
    assertThat(s.path("meanHeldBackSeconds").asDouble()).isEqualTo(0.5);
    assertThat(s.path("maxHeldBackSeconds").asDouble()).isEqualTo(0.9);
    assertThat(s.path("answersResentShort").asLong()).isEqualTo(2);
    assertThat(s.path("answersResentEmpty").asLong()).isEqualTo(1);
    assertThat(s.path("streamedAnswers").path("offScript").asLong()).isEqualTo(1);
    assertThat(results.get(1).has("sessions")).as("present, null for open loop").isTrue();
    assertThat(results.get(1).path("sessions").isNull()).isTrue();
    assertThat(ReportJson.read(file).workloads().get(0).results().get(0).sessions()).isEqualTo(held);
    assertThat(MarkdownReport.render(report)).contains("| kv_aware | 4 of 6 | 2.000 | 0.500 | 0.900 | 2 (1) | 8 of 9 |")
        .doesNotContain("| round_robin | 0 of");
  }

  @Test
  void sessionCountsMustBeConsistent() {
    assertThatThrownBy(() -> new Sessions(false, 2, 3, 1, 1, 1, 0, 0, null))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new Sessions(true, 2, 1, 1, 1, 1, 1, 2, null))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void markdownHasOneRowPerPolicyOursFirstWithRatiosAgainstTheBaseline() {
    String md = MarkdownReport.render(report());
    assertThat(md).contains("## `system-prompt:count=20`", "## `unique:count=20`", "AbRunner --test");
    assertThat(md).contains("| policy | TTFT p50 | TTFT p99 | E2E p50 |");
    String section = md.substring(md.indexOf("## `system-prompt:count=20`"), md.indexOf("## `unique:count=20`"));
    String results = section.substring(section.indexOf("| policy | TTFT p50"), section.indexOf("\n\n",
        section.indexOf("| policy | TTFT p50")));
    List<String> rows = results.lines().filter(l -> l.startsWith("| ") && !l.startsWith("| policy")).toList();
    assertThat(rows).hasSize(3);
    assertThat(rows.get(0)).startsWith("| kv_aware (ours) | 20.0 | 20.0 | 60.0 |").contains("| 2.00x | 2.00x | 2.00x |");
    assertThat(rows.get(1)).startsWith("| round_robin | 40.0 |").contains("| 1.00x | 1.00x | 1.00x |");
    assertThat(rows.get(2)).startsWith("| least_load | 30.0 |").contains("| 1.33x |");
    assertThat(rows.get(0)).contains("| 60.0% |").contains("1.50 / 1.50 / 2.00").contains("overflow 1");
    assertThat(md).contains("## Summary").contains("| `unique:count=20` | 0.0% | 20.0 / 60.0% |");
    // the router's cost: 0.6 s of CPU over 6 requests, no JIT figure from these snapshots, 60 MB resident
    assertThat(section).contains("| policy | router CPU s | µs per request | of which JIT s |")
        .contains("| kv_aware | 0.60 | 100,000 | - | - | 60.0 | 100 / 400 |");
  }

  @Test
  void theEnginesTtftTableAppearsWhenTheWorkersExportedTheirHistograms(@TempDir Path dir) throws Exception {
    assertThat(MarkdownReport.render(report())).as("no histograms scraped").doesNotContain("at the engines");
    // kv_aware's six requests took 20 ms to the first token at the client; the engines counted 12 ms each, their
    // servers 15 ms, and were 0.5 ms late in all
    RunData r = RunDataFixtures.run("kv_aware", 20, 600);
    Map<String, WorkerCounters> counters = new java.util.LinkedHashMap<>();
    counters.put("a", new WorkerCounters(3000, 1800, 3000, 33, 3, 1200, 1800, 0.036, 3, 0.0015, 0.045, 3));
    counters.put("b", new WorkerCounters(2000, 1200, 2000, 22, 2, 800, 1200, 0.024, 2, 0.001, 0.03, 2));
    counters.put("c", new WorkerCounters(1000, 600, 1000, 11, 1, 400, 600, 0.012, 1, 0.0005, 0.015, 1));
    RunData run = new RunData("kv_aware", r.workers(), r.requests(), r.itlMicros(), r.durationMicros(), counters,
        r.load(), r.loadIntervalMicros(), null, null, -1, null, 1, List.of(), null);
    Workload w = WorkloadCatalog.create("system-prompt:count=20");
    var ideal = w.idealReuse(16);
    AbReport report = new AbReport(AbReport.SCHEMA, "2026-01-01T00:00:00Z", Map.of("command", "t"), "kv_aware",
        "kv_aware", List.of(WorkloadResult.of("system-prompt:count=20", w, ideal,
            List.of(PolicyResult.summarize(run, ideal)))));
    // 8.01: the client's 20 ms as HdrHistogram keeps it
    assertThat(MarkdownReport.render(report)).contains("| policy | TTFT mean at the client | at the workers' HTTP "
        + "servers | at the engines | in front of them |").contains("| kv_aware | 20.0 | 15.0 | 12.0 | 8.01 | 0.50 |");
    Path file = dir.resolve("report.json");
    ReportJson.write(report, file);
    PolicyResult written = report.workloads().get(0).results().get(0);
    assertThat(written.engineTtft().frontMs()).isCloseTo(8.0, org.assertj.core.api.Assertions.within(0.05));
    assertThat(written.engineTtft()).isEqualTo(new PolicyResult.EngineTtft(6, 12.0,
        written.engineTtft().frontMs(), 0.5, 15.0));
    assertThat(ReportJson.read(file).workloads().get(0).results().get(0).engineTtft()).isEqualTo(written.engineTtft());
  }

  @Test
  void chartsAreWrittenAsNonEmptyPngs(@TempDir Path dir) throws Exception {
    List<Path> files = ReportWriter.writeAll(report(), dir);
    assertThat(files).extracting(p -> p.getFileName().toString()).contains("report.json", "report.md",
        "ttft-cdf-01-system-prompt-count-20.png", "load-01-system-prompt-count-20.png",
        "ttft-cdf-02-unique-count-20.png", "load-02-unique-count-20.png", "prefill-saved.png");
    for (Path p : files) {
      assertThat(Files.size(p)).as(p.toString()).isGreaterThan(500);
      if (p.toString().endsWith(".png")) {
        BufferedImage img = ImageIO.read(p.toFile());
        assertThat(img).as(p.toString()).isNotNull();
        assertThat(img.getWidth()).isEqualTo(900);
        assertThat(distinctColours(img)).as("a chart, not a blank canvas: " + p).isGreaterThan(8);
      }
    }
  }

  private static int distinctColours(BufferedImage img) {
    java.util.Set<Integer> c = new java.util.HashSet<>();
    for (int y = 0; y < img.getHeight(); y += 3) {
      for (int x = 0; x < img.getWidth(); x += 3) {
        c.add(img.getRGB(x, y));
      }
    }
    return c.size();
  }
}
