package dev.kvrouter.xds.server;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerSet;
import io.envoyproxy.controlplane.cache.v3.Snapshot;
import io.envoyproxy.envoy.config.core.v3.Node;
import io.envoyproxy.envoy.service.discovery.v3.DeltaDiscoveryRequest;
import io.envoyproxy.envoy.service.discovery.v3.DeltaDiscoveryResponse;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryRequest;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryResponse;
import io.envoyproxy.envoy.service.discovery.v3.Resource;
import com.google.protobuf.Any;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * What the xDS conversation says each Envoy holds, driven message by message as java-control-plane reports it
 * (the callbacks, in the order it runs them: a response's callback before the response is sent).
 */
class EnvoyClustersTest {

  private static final String CDS = EnvoyClusters.CDS;
  private final AtomicLong now = new AtomicLong(1_000);
  private final EnvoyClusters envoys = new EnvoyClusters(now::get);
  private long fleetVersion;
  private int nonces;

  private static Worker w(String name) {
    return Worker.simple(name, "10.0.0." + (name.charAt(0) - 'a' + 1), 8000, "m");
  }

  /** Publishes a fleet as XdsServer does; returns its snapshot. */
  private Snapshot publish(String... names) {
    List<Worker> ws = new ArrayList<>();
    for (String n : names) {
      ws.add(w(n));
    }
    return publish(ws);
  }

  private Snapshot publish(List<Worker> ws) {
    WorkerSet fleet = new WorkerSet(++fleetVersion, ws);
    Snapshot s = ClusterSnapshots.snapshot(fleet);
    envoys.published(fleet, s);
    return s;
  }

  /** The state-of-the-world CDS response java-control-plane sends for {@code s}; returns its nonce. */
  private String send(long stream, Snapshot s) {
    String nonce = "n" + (++nonces);
    DiscoveryResponse.Builder r = DiscoveryResponse.newBuilder().setTypeUrl(CDS).setNonce(nonce)
        .setVersionInfo(s.clusters().version());
    s.clusters().resources().values().forEach(c -> r.addResources(Any.pack(c)));
    envoys.response(stream, r.build());
    return nonce;
  }

  private void ack(long stream, Snapshot s, String nonce) {
    envoys.request(stream, DiscoveryRequest.newBuilder().setTypeUrl(CDS).setVersionInfo(s.clusters().version())
        .setResponseNonce(nonce).build());
  }

  private void connect(long stream, String version) {
    envoys.opened(stream, "");
    envoys.request(stream, DiscoveryRequest.newBuilder().setNode(Node.newBuilder().setId("kvrouter-envoy"))
        .setTypeUrl(CDS).setVersionInfo(version).build());
  }

  /** Stream 1's Envoy accepts {@code names}, then its stream closes; returns their snapshot. */
  private Snapshot cutOffHolding(String... names) {
    Snapshot s = publish(names);
    connect(1, "");
    ack(1, s, send(1, s));
    envoys.closed(1);
    return s;
  }

  private boolean holds(String name) {
    return envoys.holds(w(name));
  }

  @Test
  void withNoEnvoyKnownEveryWorkerIsHeld() {
    publish("a", "b");
    assertThat(holds("a")).isTrue();
    assertThat(envoys.missingWorkers()).isEmpty();
    assertThat(envoys.envoys()).isZero();
  }

  @Test
  void aWorkerIsHeldOnceTheEnvoyAcknowledgesTheResponseCarryingIt() {
    Snapshot one = publish("a");
    connect(1, "");
    assertThat(holds("a")).as("a first connection holds nothing yet").isFalse();
    ack(1, one, send(1, one));
    assertThat(holds("a")).isTrue();

    Snapshot two = publish("a", "b");
    String nonce = send(1, two);
    assertThat(holds("b")).as("sent, not yet accepted").isFalse();
    assertThat(holds("a")).isTrue();
    assertThat(envoys.missingWorkers()).containsExactly("b");
    ack(1, two, nonce);
    assertThat(holds("b")).isTrue();
    assertThat(envoys.missingWorkers()).isEmpty();
  }

  /**
   * Other router replicas are told what this one's Envoys hold (ReplicaSync): the listener runs after each change,
   * once, and sees the new holding; an update that changes nothing for them sends nothing.
   */
  @Test
  void theHoldingIsPublishedOnceForEveryChange() {
    List<EnvoyClusters.Holding> seen = new ArrayList<>();
    envoys.onChange(() -> seen.add(envoys.holding()));
    Snapshot one = publish("a");
    assertThat(seen).as("a fleet no Envoy has heard of changes nothing yet").isEmpty();
    connect(1, "");
    assertThat(seen).containsExactly(new EnvoyClusters.Holding(1, java.util.Set.of()));
    ack(1, one, send(1, one));
    Snapshot two = publish("a", "b");
    String nonce = send(1, two);
    ack(1, two, nonce);
    ack(1, two, nonce); // again: nothing new
    assertThat(seen).containsExactly(new EnvoyClusters.Holding(1, java.util.Set.of()),
        new EnvoyClusters.Holding(1, java.util.Set.of("a")), new EnvoyClusters.Holding(1, java.util.Set.of("a", "b")));
    assertThat(envoys.holding().holds("b")).isTrue();
    assertThat(EnvoyClusters.Holding.NONE.holds("anything")).as("none known holds nothing back").isTrue();
  }

  @Test
  void aRejectedUpdateLeavesTheEnvoyWithWhatItHad() {
    Snapshot one = publish("a");
    connect(1, "");
    ack(1, one, send(1, one));
    Snapshot two = publish("a", "b");
    String nonce = send(1, two);
    envoys.request(1, DiscoveryRequest.newBuilder().setTypeUrl(CDS).setVersionInfo(one.clusters().version())
        .setResponseNonce(nonce).setErrorDetail(com.google.rpc.Status.newBuilder().setMessage("bad")).build());
    assertThat(holds("b")).isFalse();
    assertThat(holds("a")).isTrue();
  }

  @Test
  void aWorkerIsRoutedOnlyOnceEveryEnvoyHoldsIt() {
    Snapshot one = publish("a");
    connect(1, "");
    connect(2, "");
    ack(1, one, send(1, one));
    assertThat(holds("a")).as("the second Envoy has not accepted it").isFalse();
    ack(2, one, send(2, one));
    assertThat(holds("a")).isTrue();
    assertThat(envoys.envoys()).isEqualTo(2);
  }

  /**
   * Envoy keeps its clusters when its xDS stream drops, and keeps routing by them; a worker added meanwhile is not
   * in it. Its last known clusters are remembered until it reconnects, or for a minute.
   */
  @Test
  void anEnvoyWhoseStreamClosedIsRememberedUntilItReconnectsOrForAMinute() {
    Snapshot one = cutOffHolding("a");
    Snapshot two = publish("a", "b");
    assertThat(holds("a")).isTrue();
    assertThat(holds("b")).as("the cut-off Envoy does not have b").isFalse();

    now.addAndGet(EnvoyClusters.REMEMBER_NANOS - 1);
    envoys.forgetDeparted();
    assertThat(holds("b")).isFalse();
    // It reconnects naming the version it has (known here): its stream speaks for it now, not the memory.
    connect(3, one.clusters().version());
    assertThat(envoys.envoys()).isEqualTo(1);
    assertThat(holds("b")).isFalse();
    ack(3, two, send(3, two));
    assertThat(holds("b")).isTrue();

    envoys.closed(3);
    publish("a", "b", "c");
    assertThat(holds("c")).isFalse();
    now.addAndGet(EnvoyClusters.REMEMBER_NANOS);
    envoys.forgetDeparted();
    assertThat(holds("c")).as("forgotten after a minute: an Envoy scaled away holds nothing back").isTrue();
    assertThat(envoys.envoys()).isZero();
  }

  /**
   * Envoys copied from envoy.yaml share its node id. One that starts (scaled up, restarted) while another is cut off
   * from xDS is not the one cut off: that one still lacks what is added meanwhile.
   */
  @Test
  void anEnvoyStartingUnderTheSameNodeIdDoesNotStandInForOneCutOff() {
    cutOffHolding("a");
    connect(2, "");
    Snapshot two = publish("a", "b");
    ack(2, two, send(2, two));
    assertThat(holds("b")).as("the Envoy cut off does not have b").isFalse();
    assertThat(envoys.envoys()).isEqualTo(2);
  }

  @Test
  void aReconnectNamingAVersionThisProcessNeverPublishedHasNoSayUntilItAcknowledges() {
    Snapshot one = publish("a");
    connect(1, "v7-0badc0de");
    assertThat(holds("a")).isTrue();
    assertThat(envoys.envoys()).isZero();
    ack(1, one, send(1, one));
    assertThat(envoys.envoys()).isEqualTo(1);
    publish("a", "b");
    assertThat(holds("b")).isFalse();
  }

  @Test
  void deltaStreamsAddAndRemoveWhatTheyAcknowledge() {
    Snapshot ab = publish("a", "b");
    envoys.opened(1, "");
    // A reconnect: Envoy names the resources it has
    envoys.deltaRequest(1, DeltaDiscoveryRequest.newBuilder().setTypeUrl(CDS)
        .setNode(Node.newBuilder().setId("kvrouter-envoy"))
        .putInitialResourceVersions(Worker.clusterName("a"), resourceVersion(ab, "a")).build());
    assertThat(holds("a")).isTrue();
    assertThat(holds("b")).isFalse();
    envoys.deltaResponse(1, DeltaDiscoveryResponse.newBuilder().setTypeUrl(CDS).setNonce("d1")
        .addResources(resource(ab, "b")).build());
    assertThat(holds("b")).isFalse();
    envoys.deltaRequest(1, DeltaDiscoveryRequest.newBuilder().setTypeUrl(CDS).setResponseNonce("d1").build());
    assertThat(holds("a")).isTrue();
    assertThat(holds("b")).isTrue();

    envoys.deltaResponse(1, DeltaDiscoveryResponse.newBuilder().setTypeUrl(CDS).setNonce("d2")
        .addRemovedResources(Worker.clusterName("a")).build());
    envoys.deltaRequest(1, DeltaDiscoveryRequest.newBuilder().setTypeUrl(CDS).setResponseNonce("d2").build());
    assertThat(holds("a")).isFalse();
    assertThat(holds("b")).isTrue();
  }

  @Test
  void otherResourceTypesOnTheAdsStreamChangeNothing() {
    Snapshot one = publish("a");
    connect(1, "");
    ack(1, one, send(1, one));
    String eds = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
    envoys.response(1, DiscoveryResponse.newBuilder().setTypeUrl(eds).setNonce("e1").build());
    envoys.request(1, DiscoveryRequest.newBuilder().setTypeUrl(eds).setResponseNonce("e1").build());
    assertThat(holds("a")).isTrue();
  }

  /**
   * A worker that moves (same name, new address) is routed to by its name: until Envoy accepts the new cluster it
   * sends the worker's requests to the old address. Held means holding the cluster as last published.
   */
  @Test
  void aWorkerWhoseClusterChangedIsHeldOnceTheEnvoyAcceptsTheNewOne() {
    Snapshot one = publish("a");
    connect(1, "");
    ack(1, one, send(1, one));
    assertThat(holds("a")).isTrue();
    Snapshot moved = publish(List.of(Worker.simple("a", "10.0.9.9", 8000, "m")));
    String nonce = send(1, moved);
    assertThat(holds("a")).as("the Envoy still sends a's requests to its old address").isFalse();
    ack(1, moved, nonce);
    assertThat(holds("a")).isTrue();
  }

  @Test
  void aDeltaStreamHoldsAChangedClusterOnceItAcceptsTheNewVersion() {
    Snapshot one = publish("a");
    envoys.opened(1, "");
    envoys.deltaRequest(1, DeltaDiscoveryRequest.newBuilder().setTypeUrl(CDS)
        .setNode(Node.newBuilder().setId("kvrouter-envoy"))
        .putInitialResourceVersions(Worker.clusterName("a"), resourceVersion(one, "a")).build());
    assertThat(holds("a")).as("a reconnect naming the version published here").isTrue();
    Snapshot moved = publish(List.of(Worker.simple("a", "10.0.9.9", 8000, "m")));
    envoys.deltaResponse(1, DeltaDiscoveryResponse.newBuilder().setTypeUrl(CDS).setNonce("d1")
        .addResources(resource(moved, "a")).build());
    assertThat(holds("a")).isFalse();
    envoys.deltaRequest(1, DeltaDiscoveryRequest.newBuilder().setTypeUrl(CDS).setResponseNonce("d1").build());
    assertThat(holds("a")).isTrue();

    envoys.opened(2, "");
    envoys.deltaRequest(2, DeltaDiscoveryRequest.newBuilder().setTypeUrl(CDS)
        .putInitialResourceVersions(Worker.clusterName("a"), resourceVersion(one, "a")).build());
    assertThat(holds("a")).as("a second Envoy that reconnects with a's old cluster").isFalse();
  }

  /** The version java-control-plane gives worker {@code name}'s cluster in {@code s}, as delta responses carry it. */
  private static String resourceVersion(Snapshot s, String name) {
    return s.clusters().versionedResources().get(Worker.clusterName(name)).version();
  }

  /** Worker {@code name}'s cluster as a delta response carries it. */
  private static Resource resource(Snapshot s, String name) {
    return Resource.newBuilder().setName(Worker.clusterName(name)).setVersion(resourceVersion(s, name))
        .setResource(Any.pack(s.clusters().resources().get(Worker.clusterName(name)))).build();
  }
}
