package dev.kvrouter.examples.ab;

import dev.kvrouter.examples.envoy.EnvoyProcess;
import dev.kvrouter.examples.loadgen.WorkerTarget;
import dev.kvrouter.examples.report.RouterSnapshot;
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
 *
 * <p>Several router replicas ({@link Routers}): each a process of its own on its own ports, all listed in the
 * {@code kvrouter_ext_proc} cluster (the shipped RING_HASH cluster with its health checks), optionally sharing
 * their load through {@code replicas:}. Envoy's xDS comes from the first; a router crash kills the first.
 */
public final class EnvoyAbStack implements AutoCloseable {

  /**
   * The routers behind Envoy.
   *
   * @param replicas router processes, each listed in the {@code kvrouter_ext_proc} cluster
   * @param sync the replicas share their reservations and predictions (kvrouter.yaml {@code replicas:}); with
   *     false each sees the others' requests only through the workers' scraped load
   */
  public record Routers(int replicas, boolean sync) {
    public static final Routers ONE = new Routers(1, false);

    public Routers {
      if (replicas < 1 || replicas > 16) {
        throw new IllegalArgumentException("router replicas must be in [1, 16], was " + replicas);
      }
      if (sync && replicas == 1) {
        throw new IllegalArgumentException("replica sync needs at least two router replicas");
      }
    }
  }

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
  /** Each replica's kvrouter.yaml, in the order of {@link #routers}. */
  private final List<Path> routerConfigs;
  /** The running routers; the first is replaced when it is started again after {@link #killRouter}. */
  private final List<RouterLauncher.Router> routers;
  private final EnvoyProcess envoy;
  private final int listenerPort;
  private final List<Integer> routerAdminPorts;
  private final Path workersFile;
  private final String envoyVersion;
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  private EnvoyAbStack(Options options, SimFleet fleet, RouterLauncher launcher, List<Path> routerConfigs,
      List<RouterLauncher.Router> routers, EnvoyProcess envoy, int listenerPort, List<Integer> routerAdminPorts,
      Path workersFile, String envoyVersion) {
    this.launcher = launcher;
    this.routerConfigs = List.copyOf(routerConfigs);
    this.options = options;
    this.fleet = fleet;
    this.routers = new java.util.concurrent.CopyOnWriteArrayList<>(routers);
    this.envoy = envoy;
    this.listenerPort = listenerPort;
    this.routerAdminPorts = List.copyOf(routerAdminPorts);
    this.workersFile = workersFile;
    this.envoyVersion = envoyVersion;
  }

  /** Starts workers, one router and Envoy, and waits until Envoy has every worker's cluster and the model is ready. */
  public static EnvoyAbStack start(Options o, RouterLauncher launcher) throws Exception {
    return start(o, launcher, Routers.ONE);
  }

  /**
   * Starts workers, {@code routers.replicas()} routers and Envoy, and waits until Envoy has every worker's cluster
   * and every router replica in its router cluster, and every replica routes with the model ready.
   */
  public static EnvoyAbStack start(Options o, RouterLauncher launcher, Routers routerSet) throws Exception {
    Files.createDirectories(o.dir());
    Path abs = o.tokenizer().toAbsolutePath().normalize();
    int replayBase = o.replay() ? 0 : -1; // 0: an ephemeral replay port per worker, -1: none
    SimFleet fleet = SimFleet.start(new FleetConfig(o.workers(), "sim-", "127.0.0.1", 0, true, 0, replayBase, "",
        WireLayout.VLLM_MAP, o.preset(), o.model(), List.of(), abs, o.blockSize(), o.numGpuBlocks(), 0, 0, 0, 0,
        true, o.seed(), o.faults(), 2, o.kvOffloadingSizeGib(),
        o.multimodalPreset() == null ? null : MultimodalModels.preset(o.multimodalPreset()), o.scriptedOutput()));
    List<RouterLauncher.Router> routers = new ArrayList<>();
    EnvoyProcess envoy = null;
    try {
      Path workersFile = o.dir().resolve("workers.yaml");
      fleet.writeWorkersFile(workersFile);
      int n = routerSet.replicas();
      List<Integer> extProc = new ArrayList<>();
      List<Integer> xds = new ArrayList<>();
      List<Integer> admin = new ArrayList<>();
      List<String> sync = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        extProc.add(EnvoyProcess.freeLoopbackPort());
        xds.add(EnvoyProcess.freeLoopbackPort());
        admin.add(EnvoyProcess.freeLoopbackPort());
        sync.add("tcp://127.0.0.1:" + EnvoyProcess.freeLoopbackPort());
      }
      List<Path> configs = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        // the first replica keeps the single router's layout (kvrouter.yaml and router.log in the run's directory)
        Path dir = i == 0 ? o.dir() : Files.createDirectories(o.dir().resolve("replica-" + i));
        Path config = dir.resolve("kvrouter.yaml");
        // every replica gets the whole list, as one config for a replica set would: each leaves its own out
        String replicas = !routerSet.sync() ? ""
            : "replicas: {bind: '" + sync.get(i) + "', peers: ['" + String.join("', '", sync) + "']}\n";
        Files.writeString(config, String.format(
            "server: {ext_proc_port: %d, xds_port: %d, admin_port: %d, request_body_mode: BUFFERED}%n"
                + "workers: {file: \"%s\", poll_interval_ms: 200}%n"
                + "models:%n  - {name: \"%s\", tokenizer: \"%s\", block_size: %d%s}%n"
                + "%s%n"
                + "observability: {log_level: warn, truth_check_every: %d}%n%s%s",
            extProc.get(i), xds.get(i), admin.get(i), workersFile.toAbsolutePath(), o.model(), abs, o.blockSize(),
            o.multimodalPreset() == null ? "" : ", multimodal: {preset: " + o.multimodalPreset() + "}",
            o.routingYaml(), o.truthCheckEvery(), o.extraYaml().isEmpty() ? "" : o.extraYaml() + "\n", replicas));
        configs.add(config);
        routers.add(launcher.start(config));
      }
      Path bin = EnvoyProcess.binary();
      String version = EnvoyProcess.version(bin);
      String yaml = EnvoyProcess.withPorts(Files.readString(o.root().resolve("envoy-config/envoy.yaml")),
          Map.of(10000, 0, 9901, 0, 9002, extProc.get(0), 18000, xds.get(0)));
      yaml = withRouterEndpoints(yaml, extProc.subList(1, n));
      if (o.policyHeader()) {
        yaml = benchmarkVariant(yaml);
      }
      envoy = EnvoyProcess.start(bin, yaml, o.dir().resolve("envoy"), Duration.ofSeconds(60));
      int listener = envoy.listenerPort();
      List<String> expected = new ArrayList<>();
      for (SimWorker w : fleet.workers()) {
        expected.add("kvrouter_worker_" + w.name() + "::");
      }
      for (int port : extProc) {
        expected.add("kvrouter_ext_proc::127.0.0.1:" + port + "::health_flags::healthy");
      }
      envoy.awaitAdmin("/clusters", body -> expected.stream().allMatch(body::contains), Duration.ofSeconds(60));
      EnvoyAbStack stack = new EnvoyAbStack(o, fleet, launcher, configs, routers, envoy, listener, admin,
          workersFile, version);
      stack.awaitReady(Duration.ofSeconds(60));
      return stack;
    } catch (Exception | Error e) {
      if (envoy != null) {
        envoy.close();
      }
      for (RouterLauncher.Router router : routers) {
        // Envoy's readiness wait is what times out when the router never came up: say what the router said
        e.addSuppressed(new IllegalStateException(router.toString()));
        router.close();
      }
      fleet.close();
      throw e;
    }
  }

  /**
   * Adds an endpoint per port after the one endpoint of the shipped {@code kvrouter_ext_proc} cluster (further
   * router replicas on loopback), as a user lists their replicas.
   */
  public static String withRouterEndpoints(String yaml, List<Integer> ports) {
    if (ports.isEmpty()) {
      return yaml;
    }
    int cluster = yaml.indexOf("- name: kvrouter_ext_proc");
    java.util.regex.Matcher m = java.util.regex.Pattern.compile("(?m)^( +- endpoint: \\{address: \\{socket_address: "
        + "\\{address: 127\\.0\\.0\\.1, port_value: )(\\d+)(}}}\\n)").matcher(yaml);
    if (cluster < 0 || !m.find(cluster)) {
      throw new IllegalStateException("envoy.yaml: no loopback endpoint in the kvrouter_ext_proc cluster");
    }
    StringBuilder more = new StringBuilder();
    for (int port : ports) {
      more.append(m.group(1)).append(port).append(m.group(3));
    }
    return yaml.substring(0, m.end()) + more + yaml.substring(m.end());
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
   * Waits until every router replica follows every worker's events and has routed a chat request with its prompt
   * (the model's tokenizer and template loaded): its decision counter without fallback moved. Envoy deals the
   * warm-up requests over the replicas by their request ids, so it sends until each has had one.
   */
  private void awaitReady(Duration timeout) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    String warm = "{\"model\":\"" + options.model() + "\",\"messages\":[{\"role\":\"user\",\"content\":\"warm up\"}],"
        + "\"max_tokens\":1}";
    String last = "";
    boolean[] ready = new boolean[routers.size()];
    int left = ready.length;
    while (System.nanoTime() < deadline) {
      double[] before = new double[ready.length];
      boolean following = true;
      for (int i = 0; i < ready.length; i++) {
        String m = routerMetrics(i);
        following &= m != null && RouterMetrics.sum(m, "kvrouter_index_workers", "") >= options.workers();
        before[i] = m == null ? 0 : RouterMetrics.sum(m, "kvrouter_routing_decisions_total", "fallback=\"none\"");
      }
      if (following) {
        HttpResponse<String> r = post("/v1/chat/completions", warm, Map.of());
        last = r.statusCode() + " " + r.body();
        for (int i = 0; i < ready.length && r.statusCode() == 200; i++) {
          String after = routerMetrics(i);
          if (!ready[i] && after != null
              && RouterMetrics.sum(after, "kvrouter_routing_decisions_total", "fallback=\"none\"") > before[i]) {
            ready[i] = true;
            left--;
          }
        }
        if (left == 0) {
          return;
        }
        continue; // a replica not dealt a request yet: the next one has another id
      }
      Thread.sleep(200);
    }
    throw new IOException("router not ready after " + timeout + " (last warm-up: " + last + "; replicas ready: "
        + java.util.Arrays.toString(ready) + "); " + routers);
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

  /**
   * The running routers as one, whichever processes those are (its records and probes follow a restart): CPU
   * time, heap and RSS summed over the replicas, every replica's decision records. Kill and close act on all.
   */
  public RouterLauncher.Router router() {
    return new RouterLauncher.Router() {
      @Override
      public RouterSnapshot snapshot() {
        return sum(routers.stream().map(RouterLauncher.Router::snapshot).toList());
      }

      @Override
      public List<String> decisionRecords() {
        List<String> all = new ArrayList<>();
        routers.forEach(r -> all.addAll(r.decisionRecords()));
        return all;
      }

      @Override
      public void kill() {
        routers.forEach(RouterLauncher.Router::kill);
      }

      @Override
      public void close() {
        routers.forEach(RouterLauncher.Router::close);
      }

      @Override
      public String toString() {
        return routers.toString();
      }
    };
  }

  /** Snapshots of several processes as one; a field any of them cannot know is -1. */
  static RouterSnapshot sum(List<RouterSnapshot> all) {
    long cpu = 0;
    long heap = 0;
    long rss = 0;
    long jit = 0;
    for (RouterSnapshot s : all) {
      cpu = plusKnown(cpu, s.cpuTimeNanos());
      heap = plusKnown(heap, s.heapUsedBytes());
      rss = plusKnown(rss, s.rssBytes());
      jit = plusKnown(jit, s.jitCpuTimeNanos());
    }
    return new RouterSnapshot(cpu, heap, rss, jit);
  }

  /** {@code a + b}, or -1 (unknown) where either is. */
  private static long plusKnown(long a, long b) {
    return a < 0 || b < 0 ? -1 : a + b;
  }

  /** Router replicas behind Envoy. */
  public int routerReplicas() {
    return routers.size();
  }

  /**
   * The (first) router dies at once (SIGKILL for a router process): with one router Envoy's ext_proc calls fail
   * from now on; with several, its share fails until Envoy's health check takes it out of the router cluster.
   */
  public void killRouter() {
    routers.get(0).kill();
  }

  /** A new first router on the same kvrouter.yaml and ports, as a supervisor would restart it; returns once it runs. */
  public void restartRouter() throws Exception {
    routers.set(0, launcher.start(routerConfigs.get(0)));
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

  /** The (first) router's Prometheus text, or null when it does not answer. */
  public String routerMetrics() {
    return routerMetrics(0);
  }

  /** Router replica {@code i}'s Prometheus text, or null when it does not answer. */
  public String routerMetrics(int i) {
    try {
      HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:"
          + routerAdminPorts.get(i) + "/metrics")).timeout(Duration.ofSeconds(5)).build(),
          HttpResponse.BodyHandlers.ofString());
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
    routers.forEach(RouterLauncher.Router::close);
    fleet.close();
  }
}
