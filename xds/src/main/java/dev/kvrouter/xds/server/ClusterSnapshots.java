package dev.kvrouter.xds.server;

import com.google.protobuf.UInt32Value;
import com.google.protobuf.util.Durations;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerSet;
import io.envoyproxy.controlplane.cache.v3.Snapshot;
import io.envoyproxy.envoy.config.cluster.v3.CircuitBreakers;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.config.cluster.v3.OutlierDetection;
import io.envoyproxy.envoy.config.core.v3.Address;
import io.envoyproxy.envoy.config.core.v3.SocketAddress;
import io.envoyproxy.envoy.config.endpoint.v3.ClusterLoadAssignment;
import io.envoyproxy.envoy.config.endpoint.v3.Endpoint;
import io.envoyproxy.envoy.config.endpoint.v3.LbEndpoint;
import io.envoyproxy.envoy.config.endpoint.v3.LocalityLbEndpoints;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Turns a fleet into the clusters Envoy needs.
 *
 * <ul>
 *   <li>{@code kvrouter_worker_<name>}: exactly one worker, the target of {@code x-kvrouter-cluster} routing.
 *   <li>{@code kvrouter_pool_<model>}: every non-draining worker of a model, LEAST_REQUEST, with passive outlier
 *       detection, for requests the router does not pin.
 *   <li>{@code kvrouter_pool}: every non-draining worker: the default route when the router is down and the
 *       model is unknown to Envoy (the router is what reads the body).
 * </ul>
 *
 * Clusters are STATIC with inline endpoints, so no EDS round trip is needed and a new worker is routable in
 * one CDS update. Circuit-breaker limits are raised far above Envoy's defaults (1024) because admission and
 * queueing are the router's job, and Envoy silently 503-ing at 1024 in-flight requests would hide it.
 */
public final class ClusterSnapshots {

  public static final String DEFAULT_POOL = "kvrouter_pool";
  private static final int HIGH_LIMIT = 1_000_000;

  private ClusterSnapshots() {}

  public static String poolCluster(String model) {
    return DEFAULT_POOL + "_" + sanitize(model);
  }

  /** Cluster names allow any characters, but stats names do not; keep them readable and stable. */
  static String sanitize(String s) {
    StringBuilder b = new StringBuilder(s.length());
    for (char c : s.toCharArray()) {
      b.append(Character.isLetterOrDigit(c) || c == '-' || c == '.' ? Character.toLowerCase(c) : '_');
    }
    return b.toString().toLowerCase(Locale.ROOT);
  }

  public static Snapshot snapshot(WorkerSet fleet) {
    return Snapshot.create(clusters(fleet), List.of(), List.of(), List.of(), List.of(), "v" + fleet.version());
  }

  public static List<Cluster> clusters(WorkerSet fleet) {
    List<Cluster> out = new ArrayList<>();
    for (Worker w : fleet.all()) {
      out.add(cluster(w.clusterName(), Cluster.LbPolicy.ROUND_ROBIN, List.of(w), false));
    }
    List<Worker> live = fleet.all().stream().filter(w -> !w.draining()).toList();
    for (String model : fleet.models()) {
      List<Worker> ws = fleet.forModel(model).stream().filter(w -> !w.draining()).toList();
      out.add(cluster(poolCluster(model), Cluster.LbPolicy.LEAST_REQUEST, ws, true));
    }
    out.add(cluster(DEFAULT_POOL, Cluster.LbPolicy.LEAST_REQUEST, live, true));
    return out;
  }

  private static Cluster cluster(String name, Cluster.LbPolicy lb, List<Worker> workers, boolean outlier) {
    LocalityLbEndpoints.Builder locality = LocalityLbEndpoints.newBuilder();
    for (Worker w : workers) {
      locality.addLbEndpoints(LbEndpoint.newBuilder()
          .setLoadBalancingWeight(UInt32Value.of(w.weight()))
          .setEndpoint(Endpoint.newBuilder().setAddress(Address.newBuilder()
              .setSocketAddress(SocketAddress.newBuilder().setAddress(w.address()).setPortValue(w.port())))));
    }
    Cluster.Builder c = Cluster.newBuilder()
        .setName(name)
        .setType(Cluster.DiscoveryType.STATIC)
        .setConnectTimeout(Durations.fromMillis(2000))
        .setLbPolicy(lb)
        .setLoadAssignment(ClusterLoadAssignment.newBuilder().setClusterName(name).addEndpoints(locality))
        .setCircuitBreakers(CircuitBreakers.newBuilder().addThresholds(CircuitBreakers.Thresholds.newBuilder()
            .setMaxConnections(UInt32Value.of(HIGH_LIMIT))
            .setMaxPendingRequests(UInt32Value.of(HIGH_LIMIT))
            .setMaxRequests(UInt32Value.of(HIGH_LIMIT))
            .setMaxRetries(UInt32Value.of(16))));
    if (outlier) {
      c.setOutlierDetection(OutlierDetection.newBuilder()
          .setConsecutive5Xx(UInt32Value.of(5))
          .setBaseEjectionTime(Durations.fromSeconds(10))
          .setMaxEjectionPercent(UInt32Value.of(50)));
    }
    return c.build();
  }
}
