package dev.kvrouter.examples.ab;

import dev.kvrouter.examples.envoy.EnvoyProcess;
import dev.kvrouter.examples.loadgen.WorkerTarget;
import dev.kvrouter.examples.sim.fleet.FleetConfig;
import dev.kvrouter.examples.sim.fleet.MultimodalModels;
import dev.kvrouter.examples.sim.fleet.SimFleet;
import dev.kvrouter.examples.sim.fleet.SimWorker;
import dev.kvrouter.examples.sim.http.FaultControl;
import dev.kvrouter.examples.sim.http.ScriptedOutput;
import dev.kvrouter.examples.sim.timing.Preset;
import dev.kvrouter.index.wire.WireLayout;
import java.io.IOException;
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
import java.util.Objects;

/**
 * One whole deployment on loopback for an A/B through real Envoy: simulated vLLM workers over HTTP publishing KV
 * events over ZMQ ({@link SimFleet}, tokenizing with the router's own tokenizer and chat template), the router
 * (xDS + ext_proc + KV index + event subscriber, started by a {@link RouterLauncher} from a generated
 * kvrouter.yaml with a {@code models:} entry) and Envoy from the shipped {@code envoy-config/envoy.yaml}.
 *
 * <p>The shipped configs strip the trusted {@code x-kvrouter-policy} header from clients. To choose the policy per
 * request, this stack derives a benchmark variant by removing exactly that one mutation (the config users copy is
 * never changed); without {@code policyHeader} the shipped config runs as is and the router's configured policy
 * decides.
 */
public final class EnvoyAbStack implements AutoCloseable {

  /** The line of the shipped config that strips the policy header; the benchmark variant drops only this line. */
  static final String STRIP_POLICY = "- remove: x-kvrouter-policy";

  /**
   * @param root the checkout (for {@code envoy-config/envoy.yaml})
   * @param workers simulated workers
   * @param preset model and GPU of the workers
   * @param model served model name (requests, workers.yaml and the router's {@code models:} entry)
   * @param tokenizer tokenizer directory, used by the workers and the router alike
   * @param blockSize KV block size
   * @param numGpuBlocks KV blocks per worker, 0 for the preset's
   * @param seed worker seeds (engine hashes differ per worker, fixed per run)
   * @param faults initial worker faults (e.g. a slowdown), or null
   * @param policyHeader derive the Envoy variant that lets the trusted policy header through
   * @param routingYaml the {@code routing:} section of kvrouter.yaml, one line
   * @param dir working directory (configs, logs)
   * @param kvOffloadingSizeGib GiB of vLLM's native CPU offload tier per worker (0: off)
   * @param multimodalPreset the model's {@code multimodal:} preset (e.g. {@code gemma3}) for workers and router
   *     alike, or null for a text-only model
   * @param extraYaml further kvrouter.yaml sections (e.g. {@code events: {...}}), or empty
   * @param scriptedOutput the workers generate the answer a request's {@code seed} names ({@link ScriptedOutput}:
   *     workloads that script their answers), or null for their default output
   * @param truthCheckEvery the router's {@code observability.truth_check_every}, or null for 1 (every response)
   * @param replay the workers open a replay socket and workers.yaml names it (vLLM's {@code replay_endpoint})
   */
  public record Options(Path root, int workers, Preset preset, String model, Path tokenizer, int blockSize,
      int numGpuBlocks, long seed, FaultControl.Update faults, boolean policyHeader, String routingYaml, Path dir,
      double kvOffloadingSizeGib, String multimodalPreset, String extraYaml, ScriptedOutput scriptedOutput,
      Integer truthCheckEvery, boolean replay) {

    /** Options whose workers open a replay socket, as every e2e fleet does. */
    public Options(Path root, int workers, Preset preset, String model, Path tokenizer, int blockSize,
        int numGpuBlocks, long seed, FaultControl.Update faults, boolean policyHeader, String routingYaml, Path dir,
        double kvOffloadingSizeGib, String multimodalPreset, String extraYaml, ScriptedOutput scriptedOutput,
        Integer truthCheckEvery) {
      this(root, workers, preset, model, tokenizer, blockSize, numGpuBlocks, seed, faults, policyHeader, routingYaml,
          dir, kvOffloadingSizeGib, multimodalPreset, extraYaml, scriptedOutput, truthCheckEvery, true);
    }

    public Options {
      Objects.requireNonNull(root, "root");
      Objects.requireNonNull(preset, "preset");
      Objects.requireNonNull(model, "model");
      Objects.requireNonNull(tokenizer, "tokenizer");
      Objects.requireNonNull(dir, "dir");
      routingYaml = routingYaml == null ? "routing: {policy: kv_aware}" : routingYaml;
      extraYaml = extraYaml == null ? "" : extraYaml;
      // The A/B's truth check reads every response's usage; the product default follows one streamed response in 16.
      truthCheckEvery = truthCheckEvery == null ? 1 : truthCheckEvery;
    }
  }

  private final Options options;
  private final SimFleet fleet;
  private final RouterLauncher launcher;
  private final Path routerConfig;
  /** The running router; replaced when it is started again after {@link #killRouter}. */
  private volatile RouterLauncher.Router router;
  private final EnvoyProcess envoy;
  private final int listenerPort;
  private final int routerAdminPort;
  private final Path workersFile;
  private final String envoyVersion;
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  private EnvoyAbStack(Options options, SimFleet fleet, RouterLauncher launcher, Path routerConfig,
      RouterLauncher.Router router, EnvoyProcess envoy, int listenerPort, int routerAdminPort, Path workersFile,
      String envoyVersion) {
    this.launcher = launcher;
    this.routerConfig = routerConfig;
    this.options = options;
    this.fleet = fleet;
    this.router = router;
    this.envoy = envoy;
    this.listenerPort = listenerPort;
    this.routerAdminPort = routerAdminPort;
    this.workersFile = workersFile;
    this.envoyVersion = envoyVersion;
  }

  /** Starts workers, router and Envoy, and waits until Envoy has every worker's cluster and the model is ready. */
  public static EnvoyAbStack start(Options o, RouterLauncher launcher) throws Exception {
    Files.createDirectories(o.dir());
    Path abs = o.tokenizer().toAbsolutePath().normalize();
    int replayBase = o.replay() ? 0 : -1; // 0: an ephemeral replay port per worker, -1: none
    SimFleet fleet = SimFleet.start(new FleetConfig(o.workers(), "sim-", "127.0.0.1", 0, true, 0, replayBase, "",
        WireLayout.VLLM_MAP, o.preset(), o.model(), List.of(), abs, o.blockSize(), o.numGpuBlocks(), 0, 0, 0, 0,
        true, o.seed(), o.faults(), 2, o.kvOffloadingSizeGib(),
        o.multimodalPreset() == null ? null : MultimodalModels.preset(o.multimodalPreset()), o.scriptedOutput()));
    RouterLauncher.Router router = null;
    EnvoyProcess envoy = null;
    try {
      Path workersFile = o.dir().resolve("workers.yaml");
      fleet.writeWorkersFile(workersFile);
      int extProc = EnvoyProcess.freeLoopbackPort();
      int xds = EnvoyProcess.freeLoopbackPort();
      int admin = EnvoyProcess.freeLoopbackPort();
      Path config = o.dir().resolve("kvrouter.yaml");
      Files.writeString(config, String.format(
          "server: {ext_proc_port: %d, xds_port: %d, admin_port: %d, request_body_mode: BUFFERED}%n"
              + "workers: {file: workers.yaml, poll_interval_ms: 200}%n"
              + "models:%n  - {name: \"%s\", tokenizer: \"%s\", block_size: %d%s}%n"
              + "%s%n"
              + "observability: {log_level: warn, truth_check_every: %d}%n%s",
          extProc, xds, admin, o.model(), abs, o.blockSize(),
          o.multimodalPreset() == null ? "" : ", multimodal: {preset: " + o.multimodalPreset() + "}",
          o.routingYaml(), o.truthCheckEvery(), o.extraYaml()));
      router = launcher.start(config);
      Path bin = EnvoyProcess.binary();
      String version = EnvoyProcess.version(bin);
      String yaml = EnvoyProcess.withPorts(Files.readString(o.root().resolve("envoy-config/envoy.yaml")),
          Map.of(10000, 0, 9901, 0, 9002, extProc, 18000, xds));
      if (o.policyHeader()) {
        yaml = benchmarkVariant(yaml);
      }
      envoy = EnvoyProcess.start(bin, yaml, o.dir().resolve("envoy"), Duration.ofSeconds(60));
      int listener = envoy.listenerPort();
      List<String> clusters = new ArrayList<>();
      for (SimWorker w : fleet.workers()) {
        clusters.add("kvrouter_worker_" + w.name() + "::");
      }
      envoy.awaitAdmin("/clusters", body -> clusters.stream().allMatch(body::contains), Duration.ofSeconds(60));
      EnvoyAbStack stack = new EnvoyAbStack(o, fleet, launcher, config, router, envoy, listener, admin, workersFile,
          version);
      stack.awaitReady(Duration.ofSeconds(60));
      return stack;
    } catch (Exception | Error e) {
      if (envoy != null) {
        envoy.close();
      }
      if (router != null) {
        // Envoy's readiness wait is what times out when the router never came up: say what the router said
        e.addSuppressed(new IllegalStateException(router.toString()));
        router.close();
      }
      fleet.close();
      throw e;
    }
  }

  /**
   * The shipped config with the policy-header strip removed, nothing else: every other trusted header (cluster,
   * weights, tenant, rank) is still stripped.
   */
  static String benchmarkVariant(String shipped) {
    List<String> kept = new ArrayList<>();
    int removed = 0;
    for (String line : shipped.split("\n", -1)) {
      if (line.trim().equals(STRIP_POLICY)) {
        removed++;
      } else {
        kept.add(line);
      }
    }
    if (removed != 1) {
      throw new IllegalStateException("expected exactly one `" + STRIP_POLICY + "` in envoy.yaml, found " + removed);
    }
    return String.join("\n", kept);
  }

  /**
   * Waits until the router follows every worker's events and routes a chat request with its prompt (the model's
   * tokenizer and template loaded): the decision counter without fallback moves.
   */
  private void awaitReady(Duration timeout) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    String warm = "{\"model\":\"" + options.model() + "\",\"messages\":[{\"role\":\"user\",\"content\":\"warm up\"}],"
        + "\"max_tokens\":1}";
    String last = "";
    while (System.nanoTime() < deadline) {
      String m = routerMetrics();
      if (m != null && RouterMetrics.sum(m, "kvrouter_index_workers", "") >= options.workers()) {
        double before = RouterMetrics.sum(m, "kvrouter_routing_decisions_total", "fallback=\"none\"");
        HttpResponse<String> r = post("/v1/chat/completions", warm, Map.of());
        String after = routerMetrics();
        last = r.statusCode() + " " + r.body();
        if (r.statusCode() == 200 && after != null
            && RouterMetrics.sum(after, "kvrouter_routing_decisions_total", "fallback=\"none\"") > before) {
          return;
        }
      }
      Thread.sleep(200);
    }
    throw new IOException("router not ready after " + timeout + " (last warm-up: " + last + "); " + router);
  }

  public URI uri() {
    return URI.create("http://127.0.0.1:" + listenerPort);
  }

  public String model() {
    return options.model();
  }

  public SimFleet fleet() {
    return fleet;
  }

  /** The running router, whichever process that is: its records and probes follow a restart. */
  public RouterLauncher.Router router() {
    return new RouterLauncher.Router() {
      @Override
      public dev.kvrouter.examples.report.RouterSnapshot snapshot() {
        return router.snapshot();
      }

      @Override
      public List<String> decisionRecords() {
        return router.decisionRecords();
      }

      @Override
      public void kill() {
        router.kill();
      }

      @Override
      public void close() {
        router.close();
      }

      @Override
      public String toString() {
        return router.toString();
      }
    };
  }

  /** The router dies at once (SIGKILL for a router process): Envoy's ext_proc calls fail from now on. */
  public void killRouter() {
    router.kill();
  }

  /** A new router on the same kvrouter.yaml and ports, as a supervisor would restart it; returns once it runs. */
  public void restartRouter() throws Exception {
    router = launcher.start(routerConfig);
  }

  public EnvoyProcess envoy() {
    return envoy;
  }

  public String envoyVersion() {
    return envoyVersion;
  }

  /** The workers as the load generator scrapes and resets them. */
  public List<WorkerTarget> targets() throws IOException {
    return WorkerTarget.fromWorkersFile(workersFile);
  }

  /** The router's Prometheus text, or null when it does not answer. */
  public String routerMetrics() {
    try {
      HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + routerAdminPort
          + "/metrics")).timeout(Duration.ofSeconds(5)).build(), HttpResponse.BodyHandlers.ofString());
      return r.statusCode() == 200 ? r.body() : null;
    } catch (IOException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    }
  }

  /** POST through Envoy. */
  public HttpResponse<String> post(String path, String body, Map<String, String> headers) throws Exception {
    HttpRequest.Builder b = HttpRequest.newBuilder(uri().resolve(path)).timeout(Duration.ofSeconds(60))
        .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body));
    headers.forEach(b::header);
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  @Override
  public void close() {
    envoy.close();
    router.close();
    fleet.close();
  }
}
