package dev.kvrouter.extproc.load;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * Against pages rendered by the real {@code prometheus_client} with vLLM's and SGLang's metric names and labels
 * (scripts/fixtures/engine_metrics.py, vllm_metrics.py), fed whole and in every chunking.
 */
class VllmMetricsParserTest {

  static byte[] fixture(String name) throws Exception {
    Path p = Path.of(System.getProperty("kvrouter.root"))
        .resolve("ext-proc/src/test/resources/fixtures/metrics").resolve(name);
    assertThat(p).as("fixture %s (run scripts/fixtures/engine_metrics.py)", p).exists();
    return Files.readAllBytes(p);
  }

  static Map<Integer, VllmMetricsParser.Engine> parse(byte[] page, int chunk) {
    VllmMetricsParser p = new VllmMetricsParser(1 << 20);
    for (int off = 0; off < page.length; off += chunk) {
      p.feed(page, off, Math.min(chunk, page.length - off));
    }
    return p.finish();
  }

  @Test
  void singleEngineVllmPage() throws Exception {
    Map<Integer, VllmMetricsParser.Engine> e = parse(fixture("vllm_single.prom"), 1 << 20);
    assertThat(e).containsOnlyKeys(0);
    assertThat(e.get(0).running()).isEqualTo(3.0);
    assertThat(e.get(0).waiting()).isEqualTo(2.0);
    assertThat(e.get(0).kvUsage()).isEqualTo(0.4375);
    assertThat(e.get(0).numGpuBlocks()).isEqualTo(2048);
    assertThat(e.get(0).prefixCaching()).isTrue();
  }

  /** vLLM's cache config says whether the engine caches prefixes at all (Python's str of a bool); off wins. */
  @Test
  void prefixCachingIsReadFromTheCacheConfig() {
    String on = "vllm:cache_config_info{block_size=\"16\",enable_prefix_caching=\"True\",num_gpu_blocks=\"64\"} 1.0\n";
    String off = on.replace("\"True\"", "\"False\"");
    String running = "vllm:num_requests_running{model_name=\"m\"} 1\n";
    assertThat(parse((running + on).getBytes(StandardCharsets.UTF_8), 5).get(-1).prefixCaching()).isTrue();
    assertThat(parse((running + off).getBytes(StandardCharsets.UTF_8), 5).get(-1).prefixCaching()).isFalse();
    assertThat(parse((off + on).getBytes(StandardCharsets.UTF_8), 5).get(-1).prefixCaching()).isFalse();
    assertThat(parse(running.getBytes(StandardCharsets.UTF_8), 5).get(-1).prefixCaching()).isNull();
  }

  /**
   * vLLM's whole page (every family of its v1 engine) and what prometheus_client returns for the scraper's
   * filtered request on the same registry (scripts/fixtures/vllm_metrics.py) read the same.
   */
  @Test
  void vllmsWholePageAndTheFilteredOneReadTheSame() throws Exception {
    for (String page : List.of("vllm_full.prom", "vllm_full_filtered.prom")) {
      Map<Integer, VllmMetricsParser.Engine> e = parse(fixture(page), 4096);
      assertThat(e).as(page).containsOnlyKeys(0);
      assertThat(List.of(e.get(0).running(), e.get(0).waiting(), e.get(0).kvUsage())).as(page)
          .containsExactly(3.0, 2.0, 0.4375);
      assertThat(e.get(0).numGpuBlocks()).as(page).isEqualTo(2048);
    }
  }

  /** The filtered fixture was asked for exactly the parser's series: it holds each vLLM one the whole page has. */
  @Test
  void theFilteredFixtureHoldsTheParsersSeriesAndNothingElse() throws Exception {
    Set<String> whole = sampleNames(fixture("vllm_full.prom"));
    Set<String> filtered = sampleNames(fixture("vllm_full_filtered.prom"));
    assertThat(VllmMetricsParser.SERIES).containsAll(filtered);
    assertThat(filtered).containsExactlyInAnyOrderElementsOf(
        VllmMetricsParser.SERIES.stream().filter(whole::contains).toList());
    assertThat(filtered).hasSizeGreaterThanOrEqualTo(5);
  }

  static Set<String> sampleNames(byte[] page) {
    Set<String> names = new TreeSet<>();
    for (String line : new String(page, StandardCharsets.UTF_8).split("\n")) {
      if (!line.isEmpty() && !line.startsWith("#")) {
        names.add(line.split("[{ ]", 2)[0]);
      }
    }
    return names;
  }

  @Test
  void dataParallelPageIsSplitByEngineLabel() throws Exception {
    byte[] page = fixture("vllm_dp2.prom");
    for (int chunk : new int[] {1, 7, 64, 1000, page.length}) {
      Map<Integer, VllmMetricsParser.Engine> e = parse(page, chunk);
      assertThat(e).as("chunk %d", chunk).containsOnlyKeys(0, 1);
      assertThat(e.get(0).running()).isEqualTo(5.0);
      assertThat(e.get(0).waiting()).isEqualTo(0.0);
      assertThat(e.get(0).kvUsage()).isEqualTo(0.125);
      assertThat(e.get(1).running()).isEqualTo(1.0);
      assertThat(e.get(1).waiting()).isEqualTo(4.0);
      assertThat(e.get(1).kvUsage()).isEqualTo(0.75);
      assertThat(e.get(1).numGpuBlocks()).isEqualTo(4096);
    }
  }

  @Test
  void sglangPage() throws Exception {
    Map<Integer, VllmMetricsParser.Engine> e = parse(fixture("sglang.prom"), 100);
    assertThat(e).containsOnlyKeys(-1);
    assertThat(e.get(-1).running()).isEqualTo(7.0);
    assertThat(e.get(-1).waiting()).isEqualTo(2.0);
    assertThat(e.get(-1).kvUsage()).isEqualTo(0.25);
  }

  @Test
  void severalModelsOfOneEngineAddUpAndOlderNamesCount() {
    String page = """
        # TYPE vllm:num_requests_running gauge
        vllm:num_requests_running{model_name="a"} 2
        vllm:num_requests_running{model_name="b"} 3.0 1700000000000
        vllm:num_requests_waiting{model_name="a"} 1
        vllm:gpu_cache_usage_perc{model_name="a"} 0.2
        vllm:gpu_cache_usage_perc{model_name="b"} 0.3
        """;
    Map<Integer, VllmMetricsParser.Engine> e = parse(page.getBytes(StandardCharsets.UTF_8), 5);
    assertThat(e.get(-1).running()).isEqualTo(5.0);
    assertThat(e.get(-1).waiting()).isEqualTo(1.0);
    assertThat(e.get(-1).kvUsage()).isEqualTo(0.3);
  }

  @Test
  void garbageAndHugeLinesAreSkippedNotFatal() {
    String huge = "x".repeat(VllmMetricsParser.MAX_LINE + 10);
    String page = "vllm:num_requests_running{engine=\"0\"} notanumber\n"
        + "vllm:num_requests_running{engine=\"0\",broken 3\n"
        + "vllm:num_requests_waiting{engine=\"0\",note=\"" + huge + "\"} 9\n"
        + "\n\n#\nvllm:num_requests_running{engine=\"0\"} 4\n"
        + "vllm:num_requests_waiting{engine=\"0\"} 1";
    Map<Integer, VllmMetricsParser.Engine> e = parse(page.getBytes(StandardCharsets.UTF_8), 333);
    assertThat(e.get(0).running()).isEqualTo(4.0);
    assertThat(e.get(0).waiting()).isEqualTo(1.0); // last line without a newline still counts
  }

  @Test
  void readsAtMostMaxBytes() throws Exception {
    byte[] page = fixture("vllm_single.prom");
    VllmMetricsParser p = new VllmMetricsParser(300);
    p.feed(page);
    Map<Integer, VllmMetricsParser.Engine> e = p.finish();
    assertThat(p.truncated()).isTrue();
    // the first 300 bytes hold the running gauge's sample line (ends at byte 207), not the waiting one (411)
    assertThat(e.get(0).running()).isEqualTo(3.0);
    assertThat(Double.isNaN(e.get(0).waiting())).isTrue();
  }

  /**
   * A label value whose quote never closes, or labels whose brace never does, on a line of the longest kept
   * length: the parser ran past the line's end (StringIndexOutOfBounds out of feed), and the scraper counted the
   * worker that had answered as unreachable. The line is skipped; the rest of the page counts.
   */
  @Test
  void aLineEndingInsideItsLabelsIsSkippedAtEveryLengthUpToTheLimit() {
    // a quote never closed, padded with its value; labels never closed, padded with the blanks between labels
    String[][] lines = {{"vllm:num_requests_running{x=\"", "a"}, {"vllm:num_requests_running{x=\"a\"", " "}};
    for (String[] line : lines) {
      for (int length = VllmMetricsParser.MAX_LINE - 3; length <= VllmMetricsParser.MAX_LINE; length++) {
        String bad = line[0] + line[1].repeat(length - line[0].length());
        byte[] page = (bad + "\nvllm:num_requests_running 3\n").getBytes(StandardCharsets.US_ASCII);
        for (int chunk : new int[] {page.length, 4096}) {
          assertThat(parse(page, chunk).get(-1).running()).as("line of %d bytes", length).isEqualTo(3.0);
        }
      }
    }
  }

  /**
   * A series that reports NaN (or an infinity) among several of one engine: summed, it turned the engine's count
   * into NaN, which the scraper published as 0, and the result depended on the series' order.
   */
  @Test
  void aSeriesThatIsNotANumberDoesNotEraseTheOthers() {
    String a = "vllm:num_requests_running{engine=\"0\",model_name=\"a\"} 5\n";
    for (String notANumber : new String[] {"NaN", "+Inf", "-Inf"}) {
      String b = "vllm:num_requests_running{engine=\"0\",model_name=\"b\"} " + notANumber + "\n"
          + "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"b\"} " + notANumber + "\n";
      String usage = "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"a\"} 0.5\n";
      for (String page : new String[] {a + usage + b, b + a + usage}) {
        Map<Integer, VllmMetricsParser.Engine> e = parse(page.getBytes(StandardCharsets.US_ASCII), page.length());
        assertThat(e.get(0).running()).as("%s", page).isEqualTo(5.0);
        assertThat(e.get(0).kvUsage()).as("%s", page).isEqualTo(0.5);
      }
    }
  }
}
