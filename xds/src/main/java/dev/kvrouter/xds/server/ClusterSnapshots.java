package dev.kvrouter.xds.server;

import com.google.protobuf.CodedOutputStream;
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
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * Turns a fleet into the clusters Envoy needs.
 *
 * <ul>
 *   <li>{@code kvrouter_worker_<name>}: exactly one worker, the target of {@code x-kvrouter-cluster} routing.
 *   <li>{@code kvrouter_pool_<model>}: every non-draining worker of a model, LEAST_REQUEST, with passive outlier
 *       detection, for requests the router does not pin ({@link #poolCluster}).
 *   <li>{@code kvrouter_pool}: every non-draining worker: the default route when the router is down and the
 *       model is unknown to Envoy (the router is what reads the body).
 * </ul>
 *
 * Clusters are STATIC with inline endpoints, so no EDS round trip is needed and a new worker is routable in
 * one CDS update. Circuit-breaker limits are raised far above Envoy's defaults (1024) because admission and
 * queueing are the router's job, and Envoy silently 503-ing at 1024 in-flight requests would hide it.
 *
 * <p>Snapshot versions are {@code v<fleet version>-<hash of the clusters>} ({@link #version}). The fleet version
 * alone restarts at v1 in every process, and java-control-plane answers a request that carries the snapshot's
 * version with nothing (it waits for the next one): an Envoy that had accepted v1 from the previous router process,
 * or from another replica, would keep that fleet. With the hash, equal versions mean equal clusters.
 */
public final class ClusterSnapshots {

  public static final String DEFAULT_POOL = "kvrouter_pool";
  private static final int HIGH_LIMIT = 1_000_000;

  private ClusterSnapshots() {}

  /**
   * The pool cluster of a model: its name lower-cased with every character but {@code [a-z0-9.-]} as {@code _}, so
   * stats names stay readable, plus {@code _} and a hash of the model name when that changed anything, so two models
   * never share a cluster ({@code Org/Model} and {@code org_model} would both read {@code org_model}). A name kept
   * as it was has no {@code _} (a {@code _} of its own counts as a change), so it cannot meet a hashed one either.
   */
  public static String poolCluster(String model) {
    String readable = sanitize(model);
    boolean kept = readable.equals(model) && model.indexOf('_') < 0;
    return DEFAULT_POOL + "_" + (kept ? readable
        : readable + "_" + shortHash(model.getBytes(StandardCharsets.UTF_8)));
  }

  /** Cluster names allow any characters, but stats names do not; keep them readable and stable. */
  static String sanitize(String s) {
    StringBuilder b = new StringBuilder(s.length());
    for (char c : s.toCharArray()) {
      char l = Character.toLowerCase(c);
      b.append((l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == '-' || l == '.' ? l : '_');
    }
    return b.toString();
  }

  public static Snapshot snapshot(WorkerSet fleet) {
    List<Cluster> clusters = clusters(fleet);
    return Snapshot.create(clusters, List.of(), List.of(), List.of(), List.of(), version(fleet.version(), clusters));
  }

  /** The version {@link #snapshot} gives this fleet. */
  public static String version(WorkerSet fleet) {
    return version(fleet.version(), clusters(fleet));
  }

  /** {@code v<n>-<8 hex digits>}: the counter for people reading logs, the hash for Envoy (class comment). */
  static String version(long counter, List<Cluster> clusters) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    CodedOutputStream out = CodedOutputStream.newInstance(bytes);
    out.useDeterministicSerialization();
    try {
      for (Cluster c : clusters) {
        out.writeMessageNoTag(c);
      }
      out.flush();
    } catch (IOException e) {
      throw new UncheckedIOException(e); // cannot happen writing to memory
    }
    return "v" + counter + "-" + shortHash(bytes.toByteArray());
  }

  private static String shortHash(byte[] bytes) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes), 0, 4);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM has SHA-256", e);
    }
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
