package dev.kvrouter.bench.overhead;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.dist.KvrouterConfig;
import dev.kvrouter.dist.KvrouterRuntime;
import dev.kvrouter.examples.envoy.EnvoyProcess;
import dev.kvrouter.examples.fake.FakeWorker;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import org.HdrHistogram.Histogram;

/**
 * What the router costs a request: the same small body through Envoy with the ext_proc filter (both shipped
 * configs) and through an Envoy without it that sends straight to the pool, in one run, rounds interleaved so
 * machine noise hits every side alike.
 *
 * <pre>
 * java -cp bench/target/benchmarks.jar dev.kvrouter.bench.overhead.EnvoyOverheadBench \
 *     [--rounds 6] [--seconds 5] [--concurrency 4] [--out bench/results/envoy-overhead.json]
 * </pre>
 *
 * Closed loop: each of {@code concurrency} clients sends its next request when the previous one answers, so the
 * figures are latency at that concurrency and the throughput it sustains. Workers are fake (no inference), so
 * the time measured is Envoy, the router and loopback.
 */
public final class EnvoyOverheadBench {

  private static final String MODEL = "bench/model";
  private static final String BODY = "{\"model\":\"" + MODEL + "\",\"prompt\":\"Say hello to the benchmark.\","
      + "\"max_tokens\":1}";

  record Side(String name, String config, boolean router, boolean requestPhasesOnly) {
    Side(String name, String config, boolean router) {
      this(name, config, router, false);
    }
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> opt = options(args);
    int rounds = Integer.parseInt(opt.getOrDefault("rounds", "6"));
    int seconds = Integer.parseInt(opt.getOrDefault("seconds", "5"));
    int concurrency = Integer.parseInt(opt.getOrDefault("concurrency", "4"));
    Path out = Path.of(opt.getOrDefault("out", "bench/results/envoy-overhead.json"));
    Path root = Path.of(System.getProperty("kvrouter.root", ".")).toAbsolutePath().normalize();
    quietLogs();

    List<Side> sides = List.of(
        new Side("direct_to_pool", "envoy.yaml", false),
        new Side("ext_proc_buffered_cluster_header", "envoy.yaml", true),
        new Side("ext_proc_full_duplex_original_dst", "envoy-original-dst.yaml", true),
        // what the response phases cost: the router sees only the request
        new Side("ext_proc_buffered_without_response_observer", "envoy.yaml", true, true));

    Path dir = Files.createTempDirectory("kvrouter-overhead");
    List<FakeWorker> workers = fakeFleet(dir, MODEL, 3, 0);
    int extProc = EnvoyProcess.freeLoopbackPort();
    int xds = EnvoyProcess.freeLoopbackPort();
    KvrouterConfig cfg = KvrouterConfig.parse(String.format(
        "server: {ext_proc_port: %d, xds_port: %d, admin_port: %d}%nobservability: {log_level: warn}%n",
        extProc, xds, EnvoyProcess.freeLoopbackPort()), "bench");
    Path envoyBin = EnvoyProcess.binary();
    String envoyVersion = EnvoyProcess.version(envoyBin);
    Map<String, Histogram> hist = new LinkedHashMap<>();
    Map<String, List<double[]>> perRound = new LinkedHashMap<>();
    Map<String, Integer> listeners = new LinkedHashMap<>();
    List<EnvoyProcess> envoys = new ArrayList<>();
    HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    ExecutorService pool = Executors.newFixedThreadPool(concurrency);
    try (KvrouterRuntime rt = KvrouterRuntime.start(cfg, dir, KvrouterRuntime.Mode.ALL)) {
      for (Side s : sides) {
        String yml = Files.readString(root.resolve("envoy-config").resolve(s.config()));
        if (!s.router()) {
          yml = withoutFilter(withoutFilter(yml, "envoy.filters.http.ext_proc"), "kvrouter.response_observer");
        }
        if (s.requestPhasesOnly()) {
          yml = withoutFilter(yml, "kvrouter.response_observer");
        }
        yml = EnvoyProcess.withPorts(yml, Map.of(10000, 0, 9901, 0, 9002, extProc, 18000, xds));
        EnvoyProcess e = EnvoyProcess.start(envoyBin, yml, dir.resolve(s.name()), Duration.ofSeconds(30));
        envoys.add(e);
        int listener = e.listenerPort();
        e.awaitAdmin("/clusters", b -> b.contains("kvrouter_pool::"), Duration.ofSeconds(30));
        listeners.put(s.name(), listener);
        hist.put(s.name(), new Histogram(60_000_000L, 3));
        perRound.put(s.name(), new ArrayList<>());
      }
      for (Side s : sides) { // warm-up: JIT, connections
        run(http, pool, listeners.get(s.name()), concurrency, 2, new Histogram(60_000_000L, 3));
      }
      for (int r = 0; r < rounds; r++) {
        for (Side s : sides) {
          Histogram h = new Histogram(60_000_000L, 3);
          long requests = run(http, pool, listeners.get(s.name()), concurrency, seconds, h);
          hist.get(s.name()).add(h);
          perRound.get(s.name()).add(new double[] {h.getValueAtPercentile(50), h.getValueAtPercentile(99),
              requests / (double) seconds});
          System.out.printf("round %d %-36s p50 %6d us  p99 %6d us  %7.0f req/s%n", r + 1, s.name(),
              h.getValueAtPercentile(50), h.getValueAtPercentile(99), requests / (double) seconds);
        }
      }
    } finally {
      envoys.forEach(EnvoyProcess::close);
      workers.forEach(FakeWorker::close);
      pool.shutdownNow();
    }
    report(out, envoyVersion, rounds, seconds, concurrency, sides, hist, perRound);
  }

  /** Starts {@code n} fake workers on loopback and writes them to {@code dir/workers.yaml}. */
  static List<FakeWorker> fakeFleet(Path dir, String model, int n, long tokenDelayMillis) throws IOException {
    List<FakeWorker> workers = new ArrayList<>();
    StringBuilder yaml = new StringBuilder("workers:\n");
    for (int i = 1; i <= n; i++) {
      FakeWorker w = new FakeWorker("w" + i, model, tokenDelayMillis).start("127.0.0.1", 0);
      workers.add(w);
      yaml.append("  - {name: w").append(i).append(", address: 127.0.0.1, port: ").append(w.port())
          .append(", model: ").append(model).append("}\n");
    }
    Files.writeString(dir.resolve("workers.yaml"), yaml);
    return workers;
  }

  /** Runs {@code concurrency} closed-loop clients for {@code seconds}; returns the requests completed. */
  static long run(HttpClient http, ExecutorService pool, int port, int concurrency, int seconds, Histogram h)
      throws Exception {
    HttpRequest req = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/v1/completions"))
        .header("content-type", "application/json").timeout(Duration.ofSeconds(10))
        .POST(HttpRequest.BodyPublishers.ofString(BODY)).build();
    long deadline = System.nanoTime() + seconds * 1_000_000_000L;
    AtomicLong done = new AtomicLong();
    List<Future<?>> fs = new ArrayList<>();
    Histogram[] local = new Histogram[concurrency];
    for (int c = 0; c < concurrency; c++) {
      Histogram mine = local[c] = new Histogram(60_000_000L, 3);
      fs.add(pool.submit(() -> {
        while (System.nanoTime() < deadline) {
          long t0 = System.nanoTime();
          HttpResponse<Void> r = http.send(req, HttpResponse.BodyHandlers.discarding());
          long us = (System.nanoTime() - t0) / 1000;
          if (r.statusCode() != 200) {
            throw new IllegalStateException("status " + r.statusCode());
          }
          mine.recordValue(Math.min(us, 59_999_999L));
          done.incrementAndGet();
        }
        return null;
      }));
    }
    for (Future<?> f : fs) {
      f.get();
    }
    for (Histogram l : local) {
      h.add(l);
    }
    return done.get();
  }

  /**
   * The same Envoy config without one HTTP filter, found by its name. A filter's block runs from the comment
   * lines above its {@code - name:} line to the comment lines above the next filter's.
   */
  public static String withoutFilter(String yaml, String name) {
    List<String> lines = new ArrayList<>(List.of(yaml.split("\n", -1)));
    String item = "          - name: ";
    int at = lines.indexOf(item + name);
    if (at < 0) {
      throw new IllegalArgumentException("no filter named " + name);
    }
    int next = at + 1;
    while (next < lines.size() && !lines.get(next).startsWith(item)) {
      next++;
    }
    int from = at;
    while (from > 0 && lines.get(from - 1).startsWith("          #")) {
      from--;
    }
    int to = next;
    while (to > at + 1 && lines.get(to - 1).startsWith("          #")) {
      to--;
    }
    lines.subList(from, to).clear();
    return String.join("\n", lines);
  }

  static void report(Path out, String envoyVersion, int rounds, int seconds, int concurrency, List<Side> sides,
      Map<String, Histogram> hist, Map<String, List<double[]>> perRound) throws IOException {
    ObjectMapper json = new ObjectMapper();
    ObjectNode root = json.createObjectNode();
    root.put("benchmark", "envoy_overhead").put("envoy_version", envoyVersion).put("rounds", rounds)
        .put("seconds_per_round", seconds).put("concurrency", concurrency)
        .put("cpus", Runtime.getRuntime().availableProcessors())
        .put("java", System.getProperty("java.version")).put("body_bytes", BODY.length());
    ArrayNode arr = root.putArray("sides");
    double baseP50 = 0;
    double baseP99 = 0;
    double baseRps = 0;
    System.out.printf("%n| side | p50 us (median of rounds) | p99 us (median) | req/s (median) | added p50 us | p50 ratio |%n");
    System.out.printf("|---|---|---|---|---|---|%n");
    for (Side s : sides) {
      List<double[]> rs = perRound.get(s.name());
      double p50 = median(rs, 0);
      double p99 = median(rs, 1);
      double rps = median(rs, 2);
      if (!s.router()) {
        baseP50 = p50;
        baseP99 = p99;
        baseRps = rps;
      }
      Histogram h = hist.get(s.name());
      ObjectNode o = arr.addObject();
      o.put("side", s.name()).put("envoy_config", s.config()).put("router", s.router())
          .put("p50_us_median_of_rounds", p50).put("p99_us_median_of_rounds", p99).put("rps_median_of_rounds", rps)
          .put("p50_us_all", h.getValueAtPercentile(50)).put("p90_us_all", h.getValueAtPercentile(90))
          .put("p99_us_all", h.getValueAtPercentile(99)).put("requests", h.getTotalCount())
          .put("added_p50_us", p50 - baseP50).put("added_p99_us", p99 - baseP99)
          .put("rps_ratio_vs_direct", baseRps == 0 ? 0 : rps / baseRps);
      ArrayNode rounds2 = o.putArray("rounds");
      rs.forEach(v -> rounds2.addObject().put("p50_us", v[0]).put("p99_us", v[1]).put("rps", v[2]));
      System.out.printf("| %s | %.0f | %.0f | %.0f | %+.0f | %.2f |%n", s.name(), p50, p99, rps, p50 - baseP50,
          baseP50 == 0 ? 0 : p50 / baseP50);
    }
    Files.createDirectories(out.toAbsolutePath().getParent());
    json.writerWithDefaultPrettyPrinter().writeValue(out.toFile(), root);
    System.out.println("\nraw results: " + out);
  }

  static double median(List<double[]> rows, int col) {
    double[] v = rows.stream().mapToDouble(r -> r[col]).sorted().toArray();
    return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  }

  public static void quietLogs() {
    if (org.slf4j.LoggerFactory.getILoggerFactory() instanceof ch.qos.logback.classic.LoggerContext ctx) {
      ctx.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME).setLevel(ch.qos.logback.classic.Level.WARN);
    }
  }

  public static Map<String, String> options(String[] args) {
    Map<String, String> m = new LinkedHashMap<>();
    for (int i = 0; i + 1 < args.length; i += 2) {
      if (!args[i].startsWith("--")) {
        throw new IllegalArgumentException("expected --name value pairs, got " + Arrays.toString(args));
      }
      m.put(args[i].substring(2), args[i + 1]);
    }
    return m;
  }

  private EnvoyOverheadBench() {}
}
