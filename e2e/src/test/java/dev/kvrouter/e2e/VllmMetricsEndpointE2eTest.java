package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.MetricsScraper;
import dev.kvrouter.extproc.load.ScrapedLoad;
import dev.kvrouter.extproc.load.WorkerHealth;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The router's scraper against vLLM's own /metrics stack, in the real libraries vLLM serves it with (FastAPI,
 * prometheus-fastapi-instrumentator, prometheus_client, uvicorn; scripts/fixtures/vllm_metrics.py mounts them as
 * vLLM's api server does, with vLLM's metric families): the filtered request reaches prometheus_client's app and
 * reads the gauges from a page a fraction of the whole one's size; where that app is missing, the scraper reads the
 * whole page from its first round on.
 */
class VllmMetricsEndpointE2eTest {

  static final Path PYTHON = Stack.ROOT.resolve(".venv/bin/python");

  @Test
  void theFilteredScrapeReadsVllmsGaugesFromAFractionOfItsPage() throws Exception {
    try (Peer peer = Peer.start("--running", "5", "--waiting", "7", "--usage", "0.25", "--blocks", "31000")) {
      long whole = wholePageBytes(peer.port);
      try (Scrape s = new Scrape(peer.port, true)) {
        long[] perRound = new long[3];
        for (int i = 0; i < 3; i++) {
          long before = s.scraper.bytesRead();
          s.scraper.scrapeAll().get(10, TimeUnit.SECONDS);
          perRound[i] = s.scraper.bytesRead() - before;
        }
        System.out.printf("[e2e] filtered scrape bytes per round %s, whole page %d%n", Arrays.toString(perRound),
            whole);
        // the cache config (vllm:cache_config_info) is asked for in the engine's first round only
        assertThat(perRound[1]).as("rounds after the first, per round %s", Arrays.toString(perRound))
            .isEqualTo(perRound[2]).isLessThan(perRound[0]);
        ScrapedLoad load = s.scraper.scraped(WorkerId.of("vllm"));
        assertThat(load).as("scraped").isNotNull();
        assertThat(List.of(load.running(), load.waiting(), load.kvUsage())).containsExactly(5.0, 7.0, 0.25);
        assertThat(load.numGpuBlocks()).isEqualTo(31000);
        assertThat(s.scraper.wholePageWorkers()).isZero();
        assertThat(s.scraper.counts()[0]).as("ok scrapes").isEqualTo(3);
        double perScrape = s.scraper.bytesRead() / 3.0;
        assertThat(perScrape).as("bytes per scrape against the whole page's %d", whole).isLessThan(whole / 20.0);
      }
    }
  }

  @Test
  void withoutPrometheusClientsAppTheWholePageIsReadFromTheFirstRound() throws Exception {
    try (Peer peer = Peer.start("--no-mount", "--running", "4")) {
      long whole = wholePageBytes(peer.port);
      try (Scrape s = new Scrape(peer.port, true)) {
        s.scraper.scrapeAll().get(10, TimeUnit.SECONDS);
        assertThat(s.scraper.scraped(WorkerId.of("vllm")).running()).isEqualTo(4.0);
        assertThat(s.scraper.wholePageWorkers()).isEqualTo(1);
        assertThat(s.scraper.counts()).as("ok, unreachable, no metrics").containsExactly(1, 0, 0);
        long first = s.scraper.bytesRead();
        s.scraper.scrapeAll().get(10, TimeUnit.SECONDS);
        assertThat(s.scraper.bytesRead() - first).as("the second round reads the whole page")
            .isGreaterThan(whole / 2);
      }
    }
  }

  @Test
  void aServerThatIgnoresTheFilterIsReadAsItAnswers() throws Exception {
    try (Peer peer = Peer.start("--ignore-filter", "--waiting", "9");
        Scrape s = new Scrape(peer.port, true)) {
      s.scraper.scrapeAll().get(10, TimeUnit.SECONDS);
      assertThat(s.scraper.scraped(WorkerId.of("vllm")).waiting()).isEqualTo(9.0);
      assertThat(s.scraper.wholePageWorkers()).as("its answer held the gauges").isZero();
    }
  }

  static long wholePageBytes(int port) throws Exception {
    HttpResponse<byte[]> r = HttpClient.newHttpClient().send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/metrics")).build(),
        HttpResponse.BodyHandlers.ofByteArray());
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(new String(r.body(), StandardCharsets.UTF_8)).contains("vllm:time_to_first_token_seconds_bucket");
    return r.body().length;
  }

  /** The scraper as the router wires it, on one worker whose metrics URL is vLLM's default. */
  static final class Scrape implements AutoCloseable {
    final MetricsScraper scraper;

    Scrape(int port, boolean filter) {
      WorkerRegistry registry = new WorkerRegistry();
      registry.replace(List.of(new Worker("vllm", "127.0.0.1", port, "m", List.of(), Worker.Role.BOTH, null, 1, 0,
          1, null, false, Map.of())));
      LoadLedger ledger = new LoadLedger(System::nanoTime, TimeUnit.SECONDS.toNanos(300), 1000);
      WorkerHealth health = new WorkerHealth(System::nanoTime, 3, 5, TimeUnit.SECONDS.toNanos(30));
      scraper = new MetricsScraper(registry, ledger, health, System::nanoTime, Duration.ofSeconds(5), 1 << 22,
          filter);
    }

    @Override
    public void close() {
      scraper.close();
    }
  }

  /** scripts/fixtures/vllm_metrics.py --serve on a free loopback port, until closed. */
  static final class Peer implements AutoCloseable {
    final Process process;
    final int port;

    private Peer(Process process, int port) {
      this.process = process;
      this.port = port;
    }

    static Peer start(String... args) throws Exception {
      assertThat(PYTHON).as("missing %s: run scripts/setup-python.sh (CI does before the tests)", PYTHON)
          .isExecutable();
      int port;
      try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
        port = s.getLocalPort();
      }
      List<String> cmd = new ArrayList<>(List.of(PYTHON.toString(),
          Stack.ROOT.resolve("scripts/fixtures/vllm_metrics.py").toString(), "--serve", Integer.toString(port)));
      cmd.addAll(List.of(args));
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
      StringBuilder seen = new StringBuilder();
      CompletableFuture<Boolean> ready = CompletableFuture.supplyAsync(() -> {
        try {
          for (String line; (line = out.readLine()) != null; ) {
            seen.append(line).append('\n');
            if (line.equals("ready")) {
              return true;
            }
          }
        } catch (java.io.IOException e) {
          return false;
        }
        return false;
      });
      boolean up;
      try {
        up = ready.get(60, TimeUnit.SECONDS);
      } catch (java.util.concurrent.TimeoutException e) {
        up = false;
      }
      if (!up) {
        p.destroyForcibly();
        throw new AssertionError("vllm_metrics.py did not start on port " + port + ":\n" + seen);
      }
      // keep draining its output (uvicorn's access log) so it never blocks on a full pipe
      CompletableFuture.runAsync(() -> {
        try {
          while (out.readLine() != null) {
            // discard
          }
        } catch (java.io.IOException ignored) {
          // the process ended
        }
      });
      return new Peer(p, port);
    }

    @Override
    public void close() throws Exception {
      process.destroy();
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      }
    }
  }
}
