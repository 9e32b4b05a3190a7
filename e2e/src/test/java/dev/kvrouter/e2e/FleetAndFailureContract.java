package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.dist.KvrouterConfig;
import dev.kvrouter.dist.KvrouterRuntime;
import dev.kvrouter.examples.envoy.EnvoyProcess;
import dev.kvrouter.examples.fake.FakeWorker;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Changes to the fleet and failures of the router, each on a stack of its own because they change it; run
 * once per shipped Envoy config.
 */
abstract class FleetAndFailureContract {

  abstract String envoyConfig();

  @Test
  void workersFileChangesEnvoysClustersLive() throws Exception {
    try (Stack stack = new Stack(envoyConfig(), 3, 0);
        FakeWorker w4 = new FakeWorker("w4", Stack.MODEL, 0).start("127.0.0.1", 0)) {
      List<FakeWorker> fleet = new ArrayList<>(stack.workers.values());
      fleet.add(w4);
      stack.writeWorkers(fleet);
      stack.awaitClusters(List.of("kvrouter_worker_w4"), List.of());
      Map<String, Integer> served = sendAndCount(stack, 8);
      assertThat(served).containsOnlyKeys("w1", "w2", "w3", "w4");

      fleet.removeIf(w -> w.name().equals("w2"));
      stack.writeWorkers(fleet);
      stack.awaitClusters(List.of("kvrouter_worker_w4"), List.of("kvrouter_worker_w2"));
      long w2Before = stack.workers.get("w2").served();
      served = sendAndCount(stack, 6);
      assertThat(served).containsOnlyKeys("w1", "w3", "w4");
      assertThat(stack.workers.get("w2").served()).isEqualTo(w2Before);
    }
  }

  /**
   * A worker added while Envoy cannot hear of it (its xDS stream gone; here the xDS server stopped) is not routed to:
   * Envoy has no cluster for it. Before, the router sent it its share at once, and with envoy.yaml each of those
   * got Envoy's 503 (no such cluster); with envoy-original-dst.yaml they reached a worker Envoy's pools had never
   * seen. The Envoy's last clusters are remembered from what it acknowledged (EnvoyClusters).
   */
  @Test
  void aWorkerAddedWhileEnvoyIsCutOffFromXdsIsNotRoutedTo() throws Exception {
    try (Stack stack = new Stack(envoyConfig(), 3, 0);
        FakeWorker w4 = new FakeWorker("w4", Stack.MODEL, 0).start("127.0.0.1", 0)) {
      stack.runtime.xds().close();
      List<FakeWorker> fleet = new ArrayList<>(stack.workers.values());
      fleet.add(w4);
      stack.writeWorkers(fleet);
      Await.until("the router's fleet has w4", Duration.ofSeconds(10), () -> {
        stack.runtime.watcher().poll();
        return stack.runtime.registry().current().get("w4") != null;
      });
      Map<String, Integer> served = sendAndCount(stack, 12);
      assertThat(served).containsOnlyKeys("w1", "w2", "w3");
      assertThat(w4.served()).isZero();
      assertThat(stack.routerMetrics()).contains("kvrouter_workers_not_in_envoy 1.0");
    }
  }

  /**
   * The same with two router replicas in {@code all} mode behind the Envoy: its xDS stream goes to replica A only,
   * its ext_proc requests to both. B's own xDS server hears no Envoy, so before the replicas shared what their
   * Envoys hold, B routed to w4 as soon as it read workers.yaml (with envoy.yaml Envoy answered those 503, with
   * envoy-original-dst.yaml they reached a worker Envoy had never been told of). Now B holds w4 back on A's word.
   */
  @Test
  void aWorkerAddedWhileEnvoyIsCutOffFromXdsIsNotRoutedToByAReplicaWithoutItsStream() throws Exception {
    int secondPort = EnvoyProcess.freeLoopbackPort();
    int[] sync = {EnvoyProcess.freeLoopbackPort(), EnvoyProcess.freeLoopbackPort()};
    try (Stack stack = new Stack(envoyConfig(), 3, 0, new Stack.Options(RouterReplicasE2eTest.replicasYaml(sync[0],
            sync[1]), Map.of(), y -> RouterReplicasE2eTest.withSecondReplica(y, secondPort)));
        FakeWorker w4 = new FakeWorker("w4", Stack.MODEL, 0).start("127.0.0.1", 0);
        KvrouterRuntime second = router(stack, secondPort, RouterReplicasE2eTest.replicasYaml(sync[1], sync[0]),
            "e2e-replica-b", KvrouterRuntime.Mode.ALL)) {
      stack.envoy.awaitAdmin("/clusters", body -> RouterReplicasE2eTest.healthy(body, secondPort),
          Duration.ofSeconds(20));
      Await.until("B knows what A's Envoy holds", Duration.ofSeconds(10),
          () -> second.envoyGate().peersKnowingEnvoys() == 1);
      assertThat(second.xds().envoyClusters().envoys()).as("no Envoy on B's own xDS server").isZero();
      addWhileCutOff(stack, w4, second);
      List<KvrouterRuntime> replicas = List.of(stack.runtime, second);
      long[] before = replicas.stream().mapToLong(rt -> rt.extProc().inFlight().claimed()).toArray();
      Outcome outcome = sendAll(stack, 24);
      List<Integer> statuses = outcome.statuses();
      Map<String, Integer> served = outcome.served();
      Await.until("both replicas' decisions end", Duration.ofSeconds(15),
          () -> replicas.stream().allMatch(rt -> rt.extProc().inFlight().pending() == 0));
      long[] share = new long[2];
      for (int i = 0; i < 2; i++) {
        share[i] = replicas.get(i).extProc().inFlight().claimed() - before[i];
      }
      String seen = "statuses " + statuses + ", served " + served + ", routed by A and B " + Arrays.toString(share);
      assertThat(share).as(seen).doesNotContain(0L);
      assertThat(statuses).as(seen).containsOnly(200);
      assertThat(served).as(seen).containsOnlyKeys("w1", "w2", "w3");
      assertThat(w4.served()).isZero();
      assertThat(second.metricsText()).contains("kvrouter_workers_not_in_envoy 1.0");
    }
  }

  /**
   * The split deployment: Envoy's xDS stream goes to a process in {@code xds} mode, its ext_proc requests to a
   * router in {@code ext-proc} mode, whose own process hears no Envoy. Before the xds process joined the replica
   * link, the router routed to w4 as soon as it read workers.yaml (Envoy answered those 503 with envoy.yaml; with
   * envoy-original-dst.yaml they reached a worker Envoy had never been told of). Now the xds process tells the
   * router what its Envoys hold, and the router holds w4 back on its word.
   */
  @Test
  void aWorkerAddedWhileEnvoyIsCutOffFromAnXdsModeProcessIsNotRoutedToByAnExtProcRouter() throws Exception {
    int[] sync = {EnvoyProcess.freeLoopbackPort(), EnvoyProcess.freeLoopbackPort()};
    try (Stack stack = new Stack(envoyConfig(), 3, 0, new Stack.Options(RouterReplicasE2eTest.replicasYaml(sync[0],
            sync[1]), Map.of(), y -> y).withMode(KvrouterRuntime.Mode.XDS));
        FakeWorker w4 = new FakeWorker("w4", Stack.MODEL, 0).start("127.0.0.1", 0);
        KvrouterRuntime router = router(stack, stack.extProcPort, RouterReplicasE2eTest.replicasYaml(sync[1],
            sync[0]), "e2e-router", KvrouterRuntime.Mode.EXT_PROC)) {
      assertThat(stack.runtime.extProc()).as("the xds process routes nothing").isNull();
      stack.envoy.awaitAdmin("/clusters", body -> RouterReplicasE2eTest.healthy(body, stack.extProcPort),
          Duration.ofSeconds(20));
      Await.until("the router knows what the xds process's Envoy holds", Duration.ofSeconds(10),
          () -> router.envoyGate().peersKnowingEnvoys() == 1);
      addWhileCutOff(stack, w4, router);
      long before = router.extProc().inFlight().claimed();
      Outcome outcome = sendAll(stack, 12);
      Await.until("the router's decisions end", Duration.ofSeconds(15),
          () -> router.extProc().inFlight().pending() == 0);
      String seen = outcome + ", routed by the router " + (router.extProc().inFlight().claimed() - before);
      assertThat(router.extProc().inFlight().claimed() - before).as(seen).isEqualTo(12);
      assertThat(outcome.statuses()).as(seen).containsOnly(200);
      assertThat(outcome.served()).as(seen).containsOnlyKeys("w1", "w2", "w3");
      assertThat(w4.served()).isZero();
      assertThat(router.metricsText()).contains("kvrouter_workers_not_in_envoy 1.0");
    }
  }

  /**
   * Closes the xDS server of {@code stack}'s process (its Envoy keeps its clusters, remembered there for a minute) and
   * adds {@code w4} to the workers file, until that process and {@code other} have read it.
   */
  private static void addWhileCutOff(Stack stack, FakeWorker w4, KvrouterRuntime other) throws Exception {
    stack.runtime.xds().close();
    List<FakeWorker> fleet = new ArrayList<>(stack.workers.values());
    fleet.add(w4);
    stack.writeWorkers(fleet);
    for (KvrouterRuntime rt : List.of(stack.runtime, other)) {
      Await.until("the process's fleet has w4", Duration.ofSeconds(10), () -> {
        rt.watcher().poll();
        return rt.registry().current().get("w4") != null;
      });
    }
  }

  /** A router on {@code extProcPort} routing from {@code stack}'s workers file, in {@code mode}. */
  private KvrouterRuntime router(Stack stack, int extProcPort, String replicasYaml, String name,
      KvrouterRuntime.Mode mode) throws Exception {
    return KvrouterRuntime.start(KvrouterConfig.parse(String.format(
        "server: {ext_proc_port: %d, xds_port: %d, admin_port: %d, request_body_mode: %s}%n"
            + "workers: {file: workers.yaml, poll_interval_ms: 100}%n"
            + "routing: {policy: round_robin}%n"
            + "observability: {log_level: info}%n%s",
        extProcPort, EnvoyProcess.freeLoopbackPort(), EnvoyProcess.freeLoopbackPort(),
        envoyConfig().contains("original-dst") ? "FULL_DUPLEX_STREAMED" : "BUFFERED", replicasYaml), name),
        stack.dir, mode);
  }

  /** What {@code n} completions got: every status, and how many each worker served ("none (503)" when none did). */
  record Outcome(List<Integer> statuses, Map<String, Integer> served) {
  }

  static Outcome sendAll(Stack stack, int n) throws Exception {
    Map<String, Integer> served = new HashMap<>();
    List<Integer> statuses = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      HttpResponse<String> r = stack.post("/v1/completions", Stack.completion("r" + i, false, 1), Map.of());
      statuses.add(r.statusCode());
      served.merge(r.headers().firstValue(FakeWorker.SERVED_BY).orElse("none (" + r.statusCode() + ")"), 1,
          Integer::sum);
    }
    return new Outcome(statuses, served);
  }

  /**
   * A worker added under load costs no request: the router starts sending it its share once Envoy has acknowledged
   * its cluster, not when workers.yaml says so (then the requests of the moment before Envoy applied the update got
   * its 503 with envoy.yaml).
   */
  @Test
  void aWorkerAddedUnderLoadCostsNoRequest() throws Exception {
    try (Stack stack = new Stack(envoyConfig(), 3, 0);
        FakeWorker w4 = new FakeWorker("w4", Stack.MODEL, 0).start("127.0.0.1", 0)) {
      List<FakeWorker> fleet = new ArrayList<>(stack.workers.values());
      fleet.add(w4);
      java.util.concurrent.atomic.AtomicBoolean added = new java.util.concurrent.atomic.AtomicBoolean();
      List<Integer> statuses = java.util.Collections.synchronizedList(new ArrayList<>());
      java.util.concurrent.ExecutorService clients = java.util.concurrent.Executors.newFixedThreadPool(4);
      try {
        List<java.util.concurrent.Future<?>> running = new ArrayList<>();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        for (int c = 0; c < 4; c++) {
          int client = c;
          running.add(clients.submit(() -> {
            // until w4 has served a few, bounded in count and time
            for (int i = 0; i < 2000 && System.nanoTime() < end && w4.served() < 8; i++) {
              HttpResponse<String> r = stack.post("/v1/completions",
                  Stack.completion("load " + client + " " + i, false, 1), Map.of());
              statuses.add(r.statusCode());
              if (client == 0 && i == 20 && added.compareAndSet(false, true)) {
                stack.writeWorkers(fleet);
              }
            }
            return null;
          }));
        }
        for (java.util.concurrent.Future<?> f : running) {
          f.get(60, TimeUnit.SECONDS);
        }
      } finally {
        clients.shutdownNow();
      }
      assertThat(added).isTrue();
      assertThat(w4.served()).as("w4 joined").isPositive();
      assertThat(statuses).as("statuses of %d requests", statuses.size()).containsOnly(200);
    }
  }

  @Test
  void anInvalidWorkersFileKeepsTheLastGoodFleet() throws Exception {
    try (Stack stack = new Stack(envoyConfig(), 2, 0)) {
      java.nio.file.Files.writeString(stack.dir.resolve("workers.yaml"),
          "workers:\n  - {name: w1, address: not-an-ip, port: 1, model: m}\n");
      stack.runtime.watcher().poll();
      stack.runtime.watcher().poll(); // a change is applied once two polls read it alike
      assertThat(stack.runtime.registry().current().all()).hasSize(2);
      assertThat(sendAndCount(stack, 4)).containsOnlyKeys("w1", "w2");
      // requests succeed on the last good fleet, so only the log and these say the edit never took
      assertThat(stack.routerMetrics()).contains("kvrouter_workers_file_valid 0.0")
          .containsPattern("kvrouter_workers_file_rejected_total [1-9]");
      stack.writeWorkers(new ArrayList<>(stack.workers.values()));
      Await.until("the file valid again", java.time.Duration.ofSeconds(10),
          () -> stack.routerMetrics().contains("kvrouter_workers_file_valid 1.0"));
    }
  }

  @Test
  void withTheRouterDownRequestsStillSucceedThroughThePool() throws Exception {
    try (Stack stack = new Stack(envoyConfig(), 3, 0)) {
      stack.runtime.stopExtProc();
      stack.awaitRouterMarkedDown();
      int ok = 0;
      for (int i = 0; i < 9; i++) {
        // forged destinations too: with no router to overwrite them, only Envoy's header stripping stops them
        HttpResponse<String> r = stack.post("/v1/completions", Stack.completion("down" + i, i % 2 == 0, 2), Map.of(
            "x-kvrouter-cluster", "kvrouter_worker_does_not_exist",
            "x-gateway-destination-endpoint", "127.0.0.1:1"));
        assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
        assertThat(r.headers().firstValue("x-kvrouter-decision")).isEmpty();
        FakeWorker w = stack.workers.get(r.headers().firstValue(FakeWorker.SERVED_BY).orElseThrow());
        assertThat(w.lastHeaders().has("x-kvrouter-cluster")).isFalse();
        assertThat(w.lastHeaders().has("x-gateway-destination-endpoint")).isFalse();
        ok++;
      }
      assertThat(ok).isEqualTo(9);
    }
  }

  /**
   * The router paused past a health check's timeout (a long GC pause, CPU throttling: here a proxy in front of it
   * holds every byte for 1.5 s from the start of a check) stays in Envoy's router cluster, and the requests sent
   * meanwhile wait for it and are routed. One unanswered check used to take it out (0.5 s timeout, one failure):
   * with no healthy router, and panic routing off, every request of the next second went to the pool unrouted
   * (9 of 14 here with either shipped config; the shape of RouterReplicasE2eTest's one failure in CI). Now only
   * three in a row do.
   */
  @Test
  void aRouterPausedPastAHealthChecksTimeoutStaysInAndRoutesWhatArrivedMeanwhile() throws Exception {
    try (Stack stack = new Stack(envoyConfig(), 3, 0);
        StallingProxy proxy = new StallingProxy(stack.extProcPort)) {
      // a second Envoy on the same config, whose router cluster is the proxy
      try (EnvoyProcess envoy = EnvoyProcess.start(EnvoyProcess.binary(), stack.envoyYaml(proxy.port()),
          stack.dir.resolve("envoy-pause"), Duration.ofSeconds(30))) {
        envoy.awaitAdmin("/clusters", body -> body.contains("kvrouter_worker_w1::")
            && body.contains("kvrouter_ext_proc::127.0.0.1:" + proxy.port() + "::health_flags::healthy"),
            Duration.ofSeconds(20));
        String failures = "cluster.kvrouter_ext_proc.health_check.network_failure";
        double failedBefore = Stack.counter(envoy, failures);
        proxy.stallOnNextCheck(Duration.ofMillis(1500));
        long end = proxy.awaitStall(Duration.ofSeconds(5));
        // one request every 100 ms while the router is paused, each on its own
        List<CompletableFuture<HttpResponse<String>>> sent = new ArrayList<>();
        for (int i = 0; System.nanoTime() < end - 50_000_000L && i < 15; i++) {
          HttpRequest req = HttpRequest.newBuilder(
                  URI.create("http://127.0.0.1:" + envoy.listenerPort() + "/v1/completions"))
              .timeout(Duration.ofSeconds(20)).header("content-type", "application/json")
              .POST(HttpRequest.BodyPublishers.ofString(Stack.completion("paused " + i, i % 2 == 0, 2))).build();
          sent.add(stack.http.sendAsync(req, HttpResponse.BodyHandlers.ofString()));
          Thread.sleep(100);
        }
        int routed = 0;
        for (int i = 0; i < sent.size(); i++) {
          HttpResponse<String> r = sent.get(i).get(20, TimeUnit.SECONDS);
          assertThat(r.statusCode()).as("request %d: %s", i, r.body()).isEqualTo(200);
          routed += r.headers().firstValue("x-kvrouter-decision").isPresent() ? 1 : 0;
        }
        assertThat(sent).as("requests sent during the pause").hasSizeGreaterThanOrEqualTo(10);
        assertThat(Stack.counter(envoy, failures) - failedBefore).as("the pause held a check past its timeout")
            .isGreaterThanOrEqualTo(1);
        assertThat(routed).as("requests sent during the pause and routed by the router, none failed open")
            .isEqualTo(sent.size());
      }
    }
  }

  @Test
  void aBodyOverTheLimitGets413() throws Exception {
    try (Stack stack = new Stack(envoyConfig(), 1, 0)) {
      String big = "a".repeat(9 * 1024 * 1024); // over the default 8 MiB limit
      HttpResponse<String> r = stack.post("/v1/completions", Stack.completion(big, false, 1), Map.of());
      assertThat(r.statusCode()).isEqualTo(413);
      assertThat(r.body()).contains("request_too_large");
      assertThat(stack.workers.get("w1").served()).isZero();
    }
  }

  /**
   * POSTs the router does not route ({@code /v1/embeddings}, {@code /tokenize}, {@code /v1/messages/count_tokens})
   * in a fleet of two models: Envoy's default route, {@code kvrouter_pool}, spreads over every model's workers, so
   * such a request reached the other model's worker as often as not (a real vLLM answers it 404). The router names
   * the pool of the model the body gives: with envoy.yaml on the buffered body's answer; with
   * envoy-original-dst.yaml (FULL_DUPLEX_STREAMED) it used not to, and now holds the headers until the body has
   * ended, as for the requests it routes.
   */
  @Test
  void requestsTheRouterDoesNotRouteReachOnlyTheirModelsWorkers() throws Exception {
    String other = "other/model";
    try (Stack stack = new Stack(envoyConfig(), 3, 0)) {
      stack.writeWorkers(new ArrayList<>(stack.workers.values()), n -> n.equals("w3") ? other : Stack.MODEL);
      stack.awaitClusters(List.of(dev.kvrouter.xds.server.ClusterSnapshots.poolCluster(Stack.MODEL),
          dev.kvrouter.xds.server.ClusterSnapshots.poolCluster(other)), List.of());
      Await.until("the router's fleet has two models", Duration.ofSeconds(10),
          () -> stack.runtime.registry().current().forModel(other).size() == 1);
      String[] paths = {"/v1/embeddings", "/tokenize", "/v1/messages/count_tokens"};
      Map<String, Map<String, Integer>> servedByModel = new HashMap<>();
      for (int i = 0; i < 18; i++) {
        String model = i % 3 == 2 ? other : Stack.MODEL;
        HttpResponse<String> r = stack.post(paths[i % paths.length] + (i % 2 == 0 ? "" : "?x=" + i),
            "{\"model\":\"" + model + "\",\"input\":\"text " + i + "\"}", Map.of());
        // the fake worker answers 404 for these paths: which worker answered is what counts
        servedByModel.computeIfAbsent(model, m -> new HashMap<>())
            .merge(r.headers().firstValue(FakeWorker.SERVED_BY).orElseThrow(), 1, Integer::sum);
      }
      assertThat(servedByModel.get(Stack.MODEL)).as("%s", servedByModel).containsOnlyKeys("w1", "w2");
      assertThat(servedByModel.get(other)).as("%s", servedByModel).containsOnlyKeys("w3");
      // a body that names no model the fleet serves keeps the default route
      HttpResponse<String> unknown = stack.post("/v1/embeddings", "{\"model\":\"nobody/serves-it\"}", Map.of());
      assertThat(unknown.headers().firstValue(FakeWorker.SERVED_BY)).isPresent();
    }
  }

  static Map<String, Integer> sendAndCount(Stack stack, int n) throws Exception {
    Map<String, Integer> served = new HashMap<>();
    for (int i = 0; i < n; i++) {
      HttpResponse<String> r = stack.post("/v1/completions", Stack.completion("f" + i, false, 1), Map.of());
      assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
      served.merge(r.headers().firstValue(FakeWorker.SERVED_BY).orElseThrow(), 1, Integer::sum);
    }
    return served;
  }
}
