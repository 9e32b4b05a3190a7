package dev.kvrouter.bench.overhead;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.dist.KvrouterConfig;
import dev.kvrouter.dist.KvrouterRuntime;
import dev.kvrouter.examples.envoy.EnvoyProcess;
import dev.kvrouter.examples.fake.FakeWorker;
import dev.kvrouter.extproc.server.InFlight;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What following a streamed response costs the router: the same streamed requests through two routers side by
 * side, one whose response observer follows every response to its last chunk ({@code truth_check_every: 1}, the
 * behaviour before the observer could leave) and one that leaves every streamed response after its first chunk
 * ({@code truth_check_every: 0}), each behind its own real Envoy with the shipped {@code envoy.yaml}, the same
 * fake workers answering. Rounds alternate between the two so machine noise hits both alike.
 *
 * <pre>
 * java -cp bench/target/benchmarks.jar dev.kvrouter.bench.overhead.ObserverCostBench \
 *     [--rounds 6] [--requests 96] [--tokens 200] [--concurrency 8] [--out bench/results/observer-cost.json]
 * </pre>
 *
 * The routers run in this JVM, so their CPU is read per thread: the gRPC threads (Netty event loops, where the
 * ext_proc streams' messages are handled) apart from the client's and the workers'. Workers stream one SSE event
 * per token 1 ms apart, so Envoy forwards them as separate chunks, as it does vLLM's.
 */
public final class ObserverCostBench {

  private static final String MODEL = "bench/model";

  record Side(String name, int truthCheckEvery, KvrouterRuntime runtime, EnvoyProcess envoy, int port) {}

  record Round(String side, long requests, double cpuMicros, double grpcCpuMicros, double envoyCpuMicros,
      long observerMessages, long left, double seconds) {}

  public static void main(String[] args) throws Exception {
    Map<String, String> opt = EnvoyOverheadBench.options(args);
    int rounds = Integer.parseInt(opt.getOrDefault("rounds", "6"));
    int requests = Integer.parseInt(opt.getOrDefault("requests", "96"));
    int tokens = Integer.parseInt(opt.getOrDefault("tokens", "200"));
    int concurrency = Integer.parseInt(opt.getOrDefault("concurrency", "8"));
    Path out = Path.of(opt.getOrDefault("out", "bench/results/observer-cost.json"));
    Path root = Path.of(System.getProperty("kvrouter.root", ".")).toAbsolutePath().normalize();
    EnvoyOverheadBench.quietLogs();

    Path dir = Files.createTempDirectory("kvrouter-observer-cost");
    List<FakeWorker> workers = EnvoyOverheadBench.fakeFleet(dir, MODEL, 3, 1);
    Path envoyBin = EnvoyProcess.binary();
    String envoyVersion = EnvoyProcess.version(envoyBin);
    String shipped = Files.readString(root.resolve("envoy-config/envoy.yaml"));
    List<Side> sides = new ArrayList<>();
    HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    ExecutorService pool = Executors.newFixedThreadPool(concurrency);
    List<Round> results = new ArrayList<>();
    try {
      for (int every : new int[] {1, 0}) {
        int extProc = EnvoyProcess.freeLoopbackPort();
        int xds = EnvoyProcess.freeLoopbackPort();
        KvrouterConfig cfg = KvrouterConfig.parse(String.format(
            "server: {ext_proc_port: %d, xds_port: %d, admin_port: %d}%n"
                + "routing: {policy: round_robin}%n"
                + "observability: {log_level: warn, truth_check_every: %d}%n",
            extProc, xds, EnvoyProcess.freeLoopbackPort(), every), "bench");
        KvrouterRuntime rt = KvrouterRuntime.start(cfg, dir, KvrouterRuntime.Mode.ALL);
        String name = every == 1 ? "follow_every_chunk" : "leave_after_first_chunk";
        EnvoyProcess e = EnvoyProcess.start(envoyBin, EnvoyProcess.withPorts(shipped,
            Map.of(10000, 0, 9901, 0, 9002, extProc, 18000, xds)), dir.resolve(name), Duration.ofSeconds(30));
        e.awaitAdmin("/clusters", b -> b.contains("kvrouter_pool::"), Duration.ofSeconds(30));
        sides.add(new Side(name, every, rt, e, e.listenerPort()));
      }
      for (Side s : sides) { // warm-up: JIT, connections
        run(http, pool, s, requests, tokens, concurrency);
      }
      for (int r = 1; r <= rounds; r++) {
        for (Side s : sides) {
          Round x = run(http, pool, s, requests, tokens, concurrency);
          results.add(x);
          System.out.printf("round %d %-24s %5.0f us CPU/request (gRPC threads %5.0f, Envoy %5.0f), %5.1f observer "
                  + "messages/request, %d left, %.1f s%n", r, s.name(), x.cpuMicros() / x.requests(),
              x.grpcCpuMicros() / x.requests(), x.envoyCpuMicros() / x.requests(),
              x.observerMessages() / (double) x.requests(), x.left(), x.seconds());
        }
      }
    } finally {
      for (Side s : sides) {
        s.envoy().close();
        s.runtime().close();
      }
      workers.forEach(FakeWorker::close);
      pool.shutdownNow();
    }
    report(out, envoyVersion, rounds, requests, tokens, concurrency, sides, results);
  }

  /** {@code requests} streamed completions of {@code tokens} tokens, {@code concurrency} at a time, read to the end. */
  static Round run(HttpClient http, ExecutorService pool, Side s, int requests, int tokens, int concurrency)
      throws Exception {
    String body = "{\"model\":\"" + MODEL + "\",\"prompt\":\"Tell the benchmark a long story.\",\"max_tokens\":"
        + tokens + ",\"stream\":true}";
    HttpRequest req = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + s.port() + "/v1/completions"))
        .header("content-type", "application/json").timeout(Duration.ofSeconds(60))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build();
    InFlight inFlight = s.runtime().extProc().inFlight();
    await(s); // the previous round's ends are in
    long messages0 = inFlight.observerMessages();
    long left0 = inFlight.left();
    long cpu0 = processCpuNanos();
    long grpc0 = grpcThreadsCpuNanos();
    long envoy0 = s.envoy().cpuNanos();
    long t0 = System.nanoTime();
    AtomicInteger next = new AtomicInteger();
    List<Future<?>> fs = new ArrayList<>();
    for (int c = 0; c < concurrency; c++) {
      fs.add(pool.submit(() -> {
        while (next.getAndIncrement() < requests) {
          HttpResponse<InputStream> r = http.send(req, HttpResponse.BodyHandlers.ofInputStream());
          try (InputStream in = r.body()) {
            byte[] all = in.readAllBytes();
            if (r.statusCode() != 200 || all.length < tokens) {
              throw new IllegalStateException("status " + r.statusCode() + ", " + all.length + " bytes");
            }
          }
        }
        return null;
      }));
    }
    for (Future<?> f : fs) {
      f.get();
    }
    await(s);
    double seconds = (System.nanoTime() - t0) / 1e9;
    return new Round(s.name(), requests, (processCpuNanos() - cpu0) / 1e3, (grpcThreadsCpuNanos() - grpc0) / 1e3,
        (s.envoy().cpuNanos() - envoy0) / 1e3, inFlight.observerMessages() - messages0, inFlight.left() - left0,
        seconds);
  }

  /** Until every reservation of this side is released (bounded: 10 s). */
  static void await(Side s) throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (s.runtime().ledger().liveReservations() > 0 && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
  }

  static long processCpuNanos() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
  }

  /** CPU of the gRPC transport threads (both routers' ext_proc and xDS servers; the client speaks HTTP/1.1). */
  static long grpcThreadsCpuNanos() {
    ThreadMXBean t = ManagementFactory.getThreadMXBean();
    long sum = 0;
    for (var info : t.getThreadInfo(t.getAllThreadIds())) {
      if (info != null && info.getThreadName().startsWith("grpc-")) {
        long c = t.getThreadCpuTime(info.getThreadId());
        sum += Math.max(0, c);
      }
    }
    return sum;
  }

  static void report(Path out, String envoyVersion, int rounds, int requests, int tokens, int concurrency,
      List<Side> sides, List<Round> results) throws java.io.IOException {
    ObjectMapper json = new ObjectMapper();
    ObjectNode root = json.createObjectNode();
    root.put("benchmark", "observer_cost").put("envoy_version", envoyVersion).put("rounds", rounds)
        .put("requests_per_round", requests).put("tokens_per_response", tokens).put("concurrency", concurrency)
        .put("cpus", Runtime.getRuntime().availableProcessors()).put("java", System.getProperty("java.version"));
    ArrayNode arr = root.putArray("sides");
    double[] cpu = new double[sides.size()];
    double[] msgs = new double[sides.size()];
    double[] grpc = new double[sides.size()];
    double[] envoy = new double[sides.size()];
    System.out.printf("%n| side | this JVM's CPU us / request (median of rounds) | its gRPC threads | Envoy's CPU | "
        + "observer messages / request | left / request |%n|---|---|---|---|---|---|%n");
    for (int i = 0; i < sides.size(); i++) {
      Side s = sides.get(i);
      List<double[]> rs = results.stream().filter(r -> r.side().equals(s.name()))
          .map(r -> new double[] {r.cpuMicros() / r.requests(), r.grpcCpuMicros() / r.requests(),
              r.observerMessages() / (double) r.requests(), r.left() / (double) r.requests(), r.seconds(),
              r.envoyCpuMicros() / r.requests()})
          .toList();
      cpu[i] = EnvoyOverheadBench.median(rs, 0);
      msgs[i] = EnvoyOverheadBench.median(rs, 2);
      ObjectNode o = arr.addObject();
      o.put("side", s.name()).put("truth_check_every", s.truthCheckEvery())
          .put("cpu_us_per_request_median", cpu[i])
          .put("grpc_cpu_us_per_request_median", EnvoyOverheadBench.median(rs, 1))
          .put("observer_messages_per_request_median", msgs[i])
          .put("left_per_request_median", EnvoyOverheadBench.median(rs, 3))
          .put("envoy_cpu_us_per_request_median", EnvoyOverheadBench.median(rs, 5));
      ArrayNode rr = o.putArray("rounds");
      rs.forEach(v -> rr.addObject().put("cpu_us_per_request", v[0]).put("grpc_cpu_us_per_request", v[1])
          .put("observer_messages_per_request", v[2]).put("left_per_request", v[3]).put("seconds", v[4])
          .put("envoy_cpu_us_per_request", v[5]));
      grpc[i] = EnvoyOverheadBench.median(rs, 1);
      envoy[i] = EnvoyOverheadBench.median(rs, 5);
      System.out.printf("| %s | %.0f | %.0f | %.0f | %.1f | %.2f |%n", s.name(), cpu[i], grpc[i], envoy[i], msgs[i],
          EnvoyOverheadBench.median(rs, 3));
    }
    double saved = msgs[0] - msgs[1];
    root.put("jvm_cpu_ratio_leave_vs_follow", cpu[1] / cpu[0]).put("grpc_cpu_ratio_leave_vs_follow", grpc[1] / grpc[0])
        .put("envoy_cpu_ratio_leave_vs_follow", envoy[1] / envoy[0])
        .put("jvm_cpu_us_per_observer_message", (cpu[0] - cpu[1]) / saved)
        .put("grpc_cpu_us_per_observer_message", (grpc[0] - grpc[1]) / saved)
        .put("envoy_cpu_us_per_observer_message", (envoy[0] - envoy[1]) / saved);
    System.out.printf("%nleaving after the first chunk, per observer message saved: %.1f us of this JVM's CPU (%.1f on "
        + "the gRPC threads), %.1f us of Envoy's; gRPC threads %.2fx, Envoy %.2fx the CPU per request%n",
        (cpu[0] - cpu[1]) / saved, (grpc[0] - grpc[1]) / saved, (envoy[0] - envoy[1]) / saved, grpc[1] / grpc[0],
        envoy[1] / envoy[0]);
    Files.createDirectories(out.toAbsolutePath().getParent());
    json.writerWithDefaultPrettyPrinter().writeValue(out.toFile(), root);
    System.out.println("raw results: " + out);
  }

  private ObserverCostBench() {}
}
