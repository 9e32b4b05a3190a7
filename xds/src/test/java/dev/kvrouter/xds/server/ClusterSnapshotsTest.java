package dev.kvrouter.xds.server;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerSet;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

class ClusterSnapshotsTest {

  final WorkerSet fleet = new WorkerSet(7, List.of(
      Worker.simple("a", "10.0.0.1", 8000, "Qwen/Qwen3-8B"),
      Worker.simple("b", "10.0.0.2", 8000, "Qwen/Qwen3-8B").withDraining(true),
      Worker.simple("c", "10.0.0.3", 8001, "llama")));

  Map<String, Cluster> clusters() {
    return ClusterSnapshots.clusters(fleet).stream().collect(Collectors.toMap(Cluster::getName, c -> c));
  }

  static List<String> endpoints(Cluster c) {
    return c.getLoadAssignment().getEndpointsList().stream().flatMap(l -> l.getLbEndpointsList().stream())
        .map(e -> e.getEndpoint().getAddress().getSocketAddress())
        .map(s -> s.getAddress() + ":" + s.getPortValue()).toList();
  }

  @Test
  void oneClusterPerWorkerIncludingDrainingOnesSoInFlightRoutesStayValid() {
    Map<String, Cluster> cs = clusters();
    assertThat(endpoints(cs.get("kvrouter_worker_a"))).containsExactly("10.0.0.1:8000");
    assertThat(endpoints(cs.get("kvrouter_worker_b"))).containsExactly("10.0.0.2:8000");
    assertThat(cs.get("kvrouter_worker_a").getType()).isEqualTo(Cluster.DiscoveryType.STATIC);
  }

  @Test
  void poolsHoldOnlyLiveWorkersAndBalanceByLeastRequest() {
    Map<String, Cluster> cs = clusters();
    Cluster qwen = cs.get(ClusterSnapshots.poolCluster("Qwen/Qwen3-8B"));
    assertThat(endpoints(qwen)).containsExactly("10.0.0.1:8000");
    assertThat(qwen.getLbPolicy()).isEqualTo(Cluster.LbPolicy.LEAST_REQUEST);
    assertThat(qwen.hasOutlierDetection()).isTrue();
    assertThat(endpoints(cs.get("kvrouter_pool"))).containsExactlyInAnyOrder("10.0.0.1:8000", "10.0.0.3:8001");
    assertThat(cs).hasSize(3 + 2 + 1);
    assertThat(cs).containsKey("kvrouter_pool_llama");
  }

  /** Pool names are lower-cased with '/' as '_': "Org/Model" and "org_model" both read org_model. */
  @Test
  void everyClusterOfASnapshotHasItsOwnName() {
    WorkerSet threeModels = new WorkerSet(1, List.of(
        Worker.simple("a", "10.0.0.1", 8000, "Org/Model"),
        Worker.simple("b", "10.0.0.2", 8000, "org_model"),
        Worker.simple("c", "10.0.0.3", 8000, "org.model")));
    List<String> names = ClusterSnapshots.clusters(threeModels).stream().map(Cluster::getName).toList();
    assertThat(names).doesNotHaveDuplicates().hasSize(3 + 3 + 1);
    assertThat(ClusterSnapshots.poolCluster("Org/Model")).matches("kvrouter_pool_org_model_[0-9a-f]{8}");
    assertThat(ClusterSnapshots.poolCluster("org.model")).as("nothing to change, nothing added")
        .isEqualTo("kvrouter_pool_org.model");
  }

  @Test
  void circuitBreakersDoNotCapInferenceConcurrencyAtEnvoysDefault() {
    var t = clusters().get("kvrouter_pool").getCircuitBreakers().getThresholds(0);
    assertThat(t.getMaxRequests().getValue()).isGreaterThan(100_000);
    assertThat(t.getMaxPendingRequests().getValue()).isGreaterThan(100_000);
  }

  /**
   * The fleet version restarts at 1 in every process (and differs between replicas), so it alone cannot tell Envoy
   * whether what it holds is current: the version carries a hash of the clusters too.
   */
  @Test
  void snapshotVersionNamesTheFleetVersionAndTheClustersContent() throws Exception {
    var snap = ClusterSnapshots.snapshot(fleet);
    snap.ensureConsistent();
    String v = snap.clusters().version();
    assertThat(v).matches("v7-[0-9a-f]{8}");
    assertThat(ClusterSnapshots.snapshot(new WorkerSet(7, fleet.all())).clusters().version()).isEqualTo(v);
    assertThat(ClusterSnapshots.snapshot(new WorkerSet(7, fleet.all().subList(0, 2))).clusters().version())
        .startsWith("v7-")
        .isNotEqualTo(v);
  }
}
