package dev.kvrouter.e2e;

import dev.kvrouter.dist.KvrouterConfig;
import dev.kvrouter.dist.KvrouterRuntime;
import dev.kvrouter.examples.envoy.EnvoyProcess;
import dev.kvrouter.examples.fake.FakeWorker;
import dev.kvrouter.extproc.server.ExtProcOptions;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;

/**
 * One whole deployment on loopback for a test class: fake workers, the kvrouter runtime (xDS + ext_proc) and
 * a real Envoy process started from a config shipped in {@code envoy-config/}, each on free ports.
 */
final class Stack implements AutoCloseable {

  static final String MODEL = "test/model";
  static final Path ROOT = Path.of(System.getProperty("kvrouter.root", "..")).toAbsolutePath().normalize();

  /**
   * The real tokenizer {@code name} under {@code .cache/tokenizers/}; fails (never skips) when it is missing, since CI
   * fetches it before the tests.
   */
  static Path tokenizer(String name) {
    Path dir = ROOT.resolve(".cache/tokenizers").resolve(name);
    org.assertj.core.api.Assertions.assertThat(dir.resolve("tokenizer.json"))
        .as("missing %s: run scripts/fetch-tokenizers.sh (CI fetches it before the tests)", dir).isRegularFile();
    return dir;
  }

  final String envoyConfig;
  final Path dir;
  final Map<String, FakeWorker> workers = new LinkedHashMap<>();
  final int listenerPort;
  final int extProcPort;
  final int xdsPort;
  final KvrouterRuntime runtime;
  final EnvoyProcess envoy;
  final String envoyVersion;
  final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  final int adminPort;

  /**
   * Variations of the deployment for one test class.
   *
   * @param kvrouterYaml extra kvrouter.yaml sections (besides server, workers, routing, observability)
   * @param files files written into the deployment directory before the router starts (name to content)
   * @param envoyTransform applied to the shipped Envoy config after the ports are set
   * @param truthCheckEvery the router's {@code observability.truth_check_every}
   * @param mode what the stack's kvrouter process runs; with {@code XDS} nothing listens on {@link #extProcPort},
   *     where Envoy sends its ext_proc requests, until the test starts a router there
   */
  record Options(String kvrouterYaml, Map<String, String> files, UnaryOperator<String> envoyTransform,
      int truthCheckEvery, KvrouterRuntime.Mode mode) {
    static final Options NONE = new Options("", Map.of(), y -> y);

    Options(String kvrouterYaml, Map<String, String> files, UnaryOperator<String> envoyTransform) {
      this(kvrouterYaml, files, envoyTransform, ExtProcOptions.DEFAULT_TRUTH_CHECK_EVERY, KvrouterRuntime.Mode.ALL);
    }

    /** The router's {@code observability.truth_check_every} (the product default unless set). */
    Options withTruthCheckEvery(int n) {
      return new Options(kvrouterYaml, files, envoyTransform, n, mode);
    }

    Options withMode(KvrouterRuntime.Mode m) {
      return new Options(kvrouterYaml, files, envoyTransform, truthCheckEvery, m);
    }
  }

  Stack(String envoyConfig, int workerCount, long tokenDelayMillis) throws Exception {
    // The skeleton's contract tests expect round-robin spreading; kv_aware is the product default.
    this(envoyConfig, workerCount, tokenDelayMillis, "routing: {policy: round_robin}");
  }

  /** @param routingYaml the {@code routing:} section of kvrouter.yaml, on one line */
  Stack(String envoyConfig, int workerCount, long tokenDelayMillis, String routingYaml) throws Exception {
    this(envoyConfig, workerCount, tokenDelayMillis, routingYaml, Options.NONE);
  }

  Stack(String envoyConfig, int workerCount, long tokenDelayMillis, Options options) throws Exception {
    this(envoyConfig, workerCount, tokenDelayMillis, "routing: {policy: round_robin}", options);
  }

  Stack(String envoyConfig, int workerCount, long tokenDelayMillis, String routingYaml, Options options)
      throws Exception {
    this.envoyConfig = envoyConfig;
    dir = Files.createTempDirectory("kvrouter-e2e");
    for (Map.Entry<String, String> f : options.files().entrySet()) {
      Files.writeString(dir.resolve(f.getKey()), f.getValue());
    }
    for (int i = 1; i <= workerCount; i++) {
      FakeWorker w = new FakeWorker("w" + i, MODEL, tokenDelayMillis).start("127.0.0.1", 0);
      workers.put(w.name(), w);
    }
    writeWorkers(new ArrayList<>(workers.values()));
    extProcPort = EnvoyProcess.freeLoopbackPort();
    xdsPort = EnvoyProcess.freeLoopbackPort();
    adminPort = EnvoyProcess.freeLoopbackPort();
    boolean fullDuplex = envoyConfig.contains("original-dst");
    KvrouterConfig cfg = KvrouterConfig.parse(String.format(
        "server: {ext_proc_port: %d, xds_port: %d, admin_port: %d, request_body_mode: %s}%n"
            + "workers: {file: workers.yaml, poll_interval_ms: 100}%n"
            + "%s%n"
            + "observability: {log_level: info, truth_check_every: %d}%n%s",
        extProcPort, xdsPort, adminPort, fullDuplex ? "FULL_DUPLEX_STREAMED" : "BUFFERED", routingYaml,
        options.truthCheckEvery(), options.kvrouterYaml()), "e2e");
    runtime = KvrouterRuntime.start(cfg, dir, options.mode());
    Path bin = EnvoyProcess.binary();
    envoyVersion = EnvoyProcess.version(bin);
    String yaml = options.envoyTransform().apply(envoyYaml(extProcPort));
    envoy = EnvoyProcess.start(bin, yaml, dir.resolve("envoy"), Duration.ofSeconds(30));
    listenerPort = envoy.listenerPort();
    awaitClusters(workers.keySet().stream().map(n -> "kvrouter_worker_" + n).toList(), List.of());
  }

  void writeWorkers(List<FakeWorker> ws) throws IOException {
    writeWorkers(ws, name -> MODEL);
  }

  /** The fleet file with each worker serving {@code modelOf} its name (a fake worker answers for any model). */
  void writeWorkers(List<FakeWorker> ws, java.util.function.Function<String, String> modelOf) throws IOException {
    StringBuilder y = new StringBuilder(ws.isEmpty() ? "workers: []\n" : "workers:\n");
    for (FakeWorker w : ws) {
      y.append("  - {name: ").append(w.name()).append(", address: 127.0.0.1, port: ").append(w.port())
          .append(", model: ").append(modelOf.apply(w.name())).append("}\n");
    }
    Path tmp = dir.resolve("workers.yaml.tmp");
    Files.writeString(tmp, y);
    // Replace atomically, as config-map mounts and careful editors do.
    Files.move(tmp, dir.resolve("workers.yaml"), java.nio.file.StandardCopyOption.REPLACE_EXISTING,
        java.nio.file.StandardCopyOption.ATOMIC_MOVE);
  }

  /**
   * This stack's shipped Envoy config with its ports set: listener and admin on free ports, xDS from this stack's
   * router, the kvrouter_ext_proc cluster at {@code extProcPort} (this stack's router, or something in front of it).
   */
  String envoyYaml(int extProcPort) throws IOException {
    return EnvoyProcess.withPorts(Files.readString(ROOT.resolve("envoy-config").resolve(envoyConfig)),
        Map.of(10000, 0, 9901, 0, 9002, extProcPort, 18000, xdsPort));
  }

  /** Envoy's admin path for the stats whose names match {@code regex}. */
  static String stats(String regex) {
    return "/stats?filter=" + java.net.URLEncoder.encode(regex, java.nio.charset.StandardCharsets.UTF_8);
  }

  /** One of {@code envoy}'s counters or gauges by its full name (0 when Envoy has not created it yet). */
  static double counter(EnvoyProcess envoy, String name) {
    String body = envoy.admin(stats("^" + name.replace(".", "\\.") + "$"));
    for (String line : body == null ? new String[0] : body.split("\n")) {
      if (line.startsWith(name + ": ")) {
        return Double.parseDouble(line.substring(name.length() + 2).trim());
      }
    }
    return 0;
  }

  /** Waits until Envoy's /clusters has every name in {@code present} and none in {@code absent}. */
  void awaitClusters(List<String> present, List<String> absent) throws Exception {
    envoy.awaitAdmin("/clusters", body -> present.stream().allMatch(c -> body.contains(c + "::"))
        && absent.stream().noneMatch(c -> body.contains(c + "::")), Duration.ofSeconds(20));
    // and until the router has heard Envoy accept them: it routes to a new worker only then
    Await.until("Envoy's acknowledgement of " + present, Duration.ofSeconds(10),
        () -> runtime.xds().envoyClusters().missingWorkers().isEmpty());
  }

  /**
   * Waits, where the Envoy config health-checks the router, until Envoy has marked it down: from then on
   * requests must bypass it. Configs without health checks fail open on the first refused connection.
   */
  void awaitRouterMarkedDown() throws Exception {
    if (Files.readString(ROOT.resolve("envoy-config").resolve(envoyConfig)).contains("grpc_health_check")) {
      envoy.awaitAdmin("/clusters", body -> body.lines().anyMatch(l -> l.startsWith("kvrouter_ext_proc::")
          && l.contains("health_flags::") && l.contains("failed_active_hc")), Duration.ofSeconds(10));
    }
  }

  HttpResponse<String> post(String path, String body, Map<String, String> headers) throws Exception {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + listenerPort + path))
        .timeout(Duration.ofSeconds(20))
        .header("content-type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(body));
    headers.forEach(b::header);
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  /** The router's own /metrics (its admin port), Prometheus text. */
  String routerMetrics() {
    try {
      return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + adminPort + "/metrics"))
          .timeout(Duration.ofSeconds(5)).GET().build(), HttpResponse.BodyHandlers.ofString()).body();
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  HttpResponse<String> get(String path) throws Exception {
    return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + listenerPort + path))
        .timeout(Duration.ofSeconds(20)).GET().build(), HttpResponse.BodyHandlers.ofString());
  }

  static String completion(String prompt, boolean stream, int maxTokens) {
    return "{\"model\":\"" + MODEL + "\",\"prompt\":\"" + prompt + "\",\"max_tokens\":" + maxTokens
        + ",\"stream\":" + stream + "}";
  }

  static String chat(String content, boolean stream, int maxTokens) {
    return "{\"model\":\"" + MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"" + content + "\"}],"
        + "\"max_tokens\":" + maxTokens + ",\"stream\":" + stream + "}";
  }

  @Override
  public void close() {
    if (envoy != null) {
      envoy.close();
    }
    if (runtime != null) {
      runtime.close();
    }
    workers.values().forEach(FakeWorker::close);
  }
}
