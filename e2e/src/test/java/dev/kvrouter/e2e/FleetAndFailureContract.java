package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.fake.FakeWorker;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
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

  @Test
  void anInvalidWorkersFileKeepsTheLastGoodFleet() throws Exception {
    try (Stack stack = new Stack(envoyConfig(), 2, 0)) {
      java.nio.file.Files.writeString(stack.dir.resolve("workers.yaml"),
          "workers:\n  - {name: w1, address: not-an-ip, port: 1, model: m}\n");
      stack.runtime.watcher().poll();
      assertThat(stack.runtime.registry().current().all()).hasSize(2);
      assertThat(sendAndCount(stack, 4)).containsOnlyKeys("w1", "w2");
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
