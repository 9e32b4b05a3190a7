package dev.kvrouter.xds.server;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.config.core.v3.Node;
import io.envoyproxy.envoy.service.discovery.v3.AggregatedDiscoveryServiceGrpc;
import io.envoyproxy.envoy.service.discovery.v3.DeltaDiscoveryRequest;
import io.envoyproxy.envoy.service.discovery.v3.DeltaDiscoveryResponse;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryRequest;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryResponse;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class XdsServerTest {

  private static final String CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

  /** An ADS stream whose responses land in {@code got}. */
  private static StreamObserver<DiscoveryRequest> ads(ManagedChannel ch, LinkedBlockingQueue<DiscoveryResponse> got) {
    return AggregatedDiscoveryServiceGrpc.newStub(ch).streamAggregatedResources(new StreamObserver<>() {
      @Override public void onNext(DiscoveryResponse r) { got.add(r); }
      @Override public void onError(Throwable t) {}
      @Override public void onCompleted() {}
    });
  }

  /** One ADS stream as Envoy opens it: CDS wildcard, carrying the version it last accepted; null if none came. */
  private static DiscoveryResponse firstCdsResponse(int port, String lastAcceptedVersion) throws Exception {
    ManagedChannel ch = NettyChannelBuilder.forAddress("127.0.0.1", port).usePlaintext().build();
    try {
      LinkedBlockingQueue<DiscoveryResponse> got = new LinkedBlockingQueue<>();
      StreamObserver<DiscoveryRequest> req = ads(ch, got);
      req.onNext(DiscoveryRequest.newBuilder().setNode(Node.newBuilder().setId("envoy-1"))
          .setTypeUrl(CDS).setVersionInfo(lastAcceptedVersion).build());
      DiscoveryResponse r = got.poll(3, TimeUnit.SECONDS);
      req.onCompleted();
      return r;
    } finally {
      ch.shutdownNow();
    }
  }

  /** Envoy's first CDS request on a new stream (it holds nothing yet); returns the first response. */
  private static DiscoveryResponse subscribe(StreamObserver<DiscoveryRequest> req,
      LinkedBlockingQueue<DiscoveryResponse> got) throws InterruptedException {
    req.onNext(DiscoveryRequest.newBuilder().setNode(Node.newBuilder().setId("envoy-1")).setTypeUrl(CDS).build());
    DiscoveryResponse first = got.poll(3, TimeUnit.SECONDS);
    assertThat(first).isNotNull();
    return first;
  }

  /** A state-of-the-world ADS stream, its responses, and the first of them (the fleet then), acknowledged. */
  private record Sotw(LinkedBlockingQueue<DiscoveryResponse> got, StreamObserver<DiscoveryRequest> req,
      DiscoveryResponse first) {}

  private static Sotw acceptingTheFirstFleet(ManagedChannel ch, EnvoyClusters envoys) throws InterruptedException {
    LinkedBlockingQueue<DiscoveryResponse> got = new LinkedBlockingQueue<>();
    StreamObserver<DiscoveryRequest> req = ads(ch, got);
    DiscoveryResponse first = subscribe(req, got);
    req.onNext(DiscoveryRequest.newBuilder().setTypeUrl(CDS).setVersionInfo(first.getVersionInfo())
        .setResponseNonce(first.getNonce()).build());
    awaitMissing(envoys, List.of());
    return new Sotw(got, req, first);
  }

  /** The next response on the stream, within 3 s. */
  private static DiscoveryResponse next(LinkedBlockingQueue<DiscoveryResponse> got) throws InterruptedException {
    DiscoveryResponse r = got.poll(3, TimeUnit.SECONDS);
    assertThat(r).as("a response within 3 s").isNotNull();
    return r;
  }

  private static DiscoveryRequest nack(String accepted, String nonce) {
    return DiscoveryRequest.newBuilder().setTypeUrl(CDS).setVersionInfo(accepted).setResponseNonce(nonce)
        .setErrorDetail(com.google.rpc.Status.newBuilder().setCode(3).setMessage("bad cluster")).build();
  }

  private static List<String> clusterNames(DiscoveryResponse r) throws Exception {
    List<String> names = new ArrayList<>();
    for (var any : r.getResourcesList()) {
      names.add(any.unpack(Cluster.class).getName());
    }
    return names;
  }

  /**
   * Envoy accepted the first fleet of one router process; workers.yaml changed while the router restarted (a
   * config-map change rolling the router pod does exactly this), and the new process numbers its first fleet 1
   * again. When the version was "v" + that number, Envoy's reconnect carried the new process's own version, the
   * cache held the request as up to date, and Envoy kept the old clusters.
   */
  @Test
  void anEnvoyReconnectingWithTheOldProcesssVersionGetsTheNewProcesssFleet() throws Exception {
    WorkerRegistry oldProcess = new WorkerRegistry();
    oldProcess.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m")));
    String accepted;
    try (XdsServer s = new XdsServer(oldProcess).start("127.0.0.1", 0)) {
      DiscoveryResponse r = firstCdsResponse(s.port(), "");
      assertThat(r).isNotNull();
      accepted = r.getVersionInfo();
      assertThat(accepted).isEqualTo(s.currentVersion());
    }

    WorkerRegistry newProcess = new WorkerRegistry();
    newProcess.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m"), Worker.simple("b", "10.0.0.2", 8000, "m")));
    try (XdsServer s = new XdsServer(newProcess).start("127.0.0.1", 0)) {
      DiscoveryResponse r = firstCdsResponse(s.port(), accepted);
      assertThat(r).as("CDS response to an Envoy holding the old process's first version").isNotNull();
      assertThat(r.getVersionInfo()).isNotEqualTo(accepted);
      assertThat(clusterNames(r)).contains("kvrouter_worker_b");
    }
  }

  /**
   * An Envoy that rejects an update (NACK: its next request carries error_detail) keeps its last good config, so a
   * rejected fleet change showed only in the log. It is counted, and so are the open streams.
   */
  @Test
  void rejectedUpdatesAndOpenStreamsAreCounted() throws Exception {
    WorkerRegistry fleet = new WorkerRegistry();
    fleet.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m")));
    try (XdsServer s = new XdsServer(fleet).start("127.0.0.1", 0)) {
      ManagedChannel ch = NettyChannelBuilder.forAddress("127.0.0.1", s.port()).usePlaintext().build();
      try {
        LinkedBlockingQueue<DiscoveryResponse> got = new LinkedBlockingQueue<>();
        StreamObserver<DiscoveryRequest> req = ads(ch, got);
        DiscoveryResponse first = subscribe(req, got);
        assertThat(s.openStreams()).isEqualTo(1);
        assertThat(s.rejectedUpdates()).isZero();
        // Envoy's NACK: the last version it accepted (none), the nonce it answers, and why
        req.onNext(DiscoveryRequest.newBuilder().setTypeUrl(CDS).setResponseNonce(first.getNonce())
            .setErrorDetail(com.google.rpc.Status.newBuilder().setCode(3).setMessage("bad cluster")).build());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (s.rejectedUpdates() == 0 && System.nanoTime() < deadline) {
          Thread.sleep(10);
        }
        assertThat(s.rejectedUpdates()).isEqualTo(1);
        req.onCompleted();
        deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (s.openStreams() > 0 && System.nanoTime() < deadline) {
          Thread.sleep(10);
        }
        assertThat(s.openStreams()).isZero();
      } finally {
        ch.shutdownNow();
      }
    }
  }

  /**
   * The callbacks as java-control-plane runs them on a real ADS stream: a worker added to the fleet is held once the
   * Envoy acknowledges the response that carries it, not when the fleet changes.
   */
  @Test
  void aNewWorkerIsHeldOnceTheEnvoyAcknowledgesIt() throws Exception {
    withWorkerA((fleet, envoys, ch) -> {
      Sotw sotw = acceptingTheFirstFleet(ch, envoys);
      LinkedBlockingQueue<DiscoveryResponse> got = sotw.got();
      StreamObserver<DiscoveryRequest> req = sotw.req();

      fleet.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m"), Worker.simple("b", "10.0.0.2", 8000, "m")));
      DiscoveryResponse second = got.poll(3, TimeUnit.SECONDS);
      assertThat(second).isNotNull();
      assertThat(clusterNames(second)).contains("kvrouter_worker_b");
      assertThat(envoys.missingWorkers()).containsExactly("b");
      assertThat(envoys.holds(fleet.current().get("b"))).isFalse();
      req.onNext(DiscoveryRequest.newBuilder().setTypeUrl(CDS).setVersionInfo(second.getVersionInfo())
          .setResponseNonce(second.getNonce()).build());
      awaitMissing(envoys, List.of());
      assertThat(envoys.holds(fleet.current().get("b"))).isTrue();
      req.onCompleted();
    });
  }

  /**
   * A state-of-the-world NACK (envoy.yaml) carries the version the Envoy last accepted, and java-control-plane answered
   * it at once with the current snapshot: the update just rejected, to be rejected again and resent again for as long
   * as it stayed current, as fast as the two could exchange them (Envoy does not rate-limit its xDS requests unless
   * configured to), each a log line and a count in kvrouter_xds_rejected_total. A NACK of the current snapshot now
   * waits for the next one, sent whole as ever; a NACK of an older one is answered at once with the current.
   */
  @Test
  void aRejectedSnapshotIsNotSentAgainUntilTheFleetChanges() throws Exception {
    withWorkerA((fleet, envoys, ch) -> {
      Sotw envoy = acceptingTheFirstFleet(ch, envoys);
      LinkedBlockingQueue<DiscoveryResponse> got = envoy.got();
      String accepted = envoy.first().getVersionInfo();
      List<Worker> ab = List.of(fleet.current().get("a"), Worker.simple("b", "10.0.0.2", 8000, "m"));
      fleet.replace(ab);
      envoy.req().onNext(nack(accepted, next(got).getNonce()));
      assertThat(got.poll(500, TimeUnit.MILLISECONDS)).as("the rejected update, sent again at once").isNull();

      List<Worker> abc = new ArrayList<>(ab);
      abc.add(Worker.simple("c", "10.0.0.3", 8000, "m"));
      fleet.replace(abc);
      DiscoveryResponse withC = next(got);
      assertThat(withC.getVersionInfo()).isEqualTo(ClusterSnapshots.version(fleet.current()));
      assertThat(clusterNames(withC)).contains("kvrouter_worker_b", "kvrouter_worker_c");

      // rejected while a newer fleet was published: that one is sent at once
      fleet.replace(ab);
      envoy.req().onNext(nack(accepted, withC.getNonce()));
      assertThat(next(got).getVersionInfo()).isEqualTo(ClusterSnapshots.version(fleet.current()));
      envoy.req().onCompleted();
    });
  }

  /**
   * The same over delta ADS (envoy-original-dst.yaml), for a worker that moves: java-control-plane sends its changed
   * cluster with a new resource version, and the worker is held again once the Envoy acknowledges that response.
   */
  @Test
  void aMovedWorkerIsHeldOnceADeltaEnvoyAcknowledgesItsNewCluster() throws Exception {
    withWorkerA((fleet, envoys, ch) -> {
      LinkedBlockingQueue<DeltaDiscoveryResponse> got = new LinkedBlockingQueue<>();
      StreamObserver<DeltaDiscoveryRequest> req = deltaAcceptingTheFirstFleet(ch, got, envoys);

      fleet.replace(List.of(Worker.simple("a", "10.0.9.9", 8000, "m")));
      DeltaDiscoveryResponse moved = got.poll(3, TimeUnit.SECONDS);
      assertThat(moved).isNotNull();
      assertThat(moved.getResourcesList()).extracting(r -> r.getName()).contains("kvrouter_worker_a");
      awaitMissing(envoys, List.of("a"));
      req.onNext(DeltaDiscoveryRequest.newBuilder().setTypeUrl(CDS).setResponseNonce(moved.getNonce()).build());
      awaitMissing(envoys, List.of());
      req.onCompleted();
    });
  }

  /**
   * Over delta ADS (envoy-original-dst.yaml) java-control-plane answers a new snapshot with what changed since the
   * previous one, filtered by what each Envoy holds. An update the Envoy rejected (its NACK) was never offered again
   * when a later fleet change touched other clusters: the Envoy never got worker b's cluster (had it applied part of
   * the update, the router never learnt it), and the router held b out of routing for good
   * (KvrouterWorkerNotInEnvoy). The next snapshot now offers a rejecting Envoy everything it lacks, once: not at the
   * NACK itself, which would only have the same update rejected again.
   */
  @Test
  void aDeltaUpdateTheEnvoyRejectedIsOfferedAgainWithTheNextFleet() throws Exception {
    withWorkerA((fleet, envoys, ch) -> {
      LinkedBlockingQueue<DeltaDiscoveryResponse> got = new LinkedBlockingQueue<>();
      StreamObserver<DeltaDiscoveryRequest> req = deltaAcceptingTheFirstFleet(ch, got, envoys);

      Worker a = fleet.current().get("a");
      fleet.replace(List.of(a, Worker.simple("b", "10.0.0.2", 8000, "m")));
      DeltaDiscoveryResponse withB = got.poll(3, TimeUnit.SECONDS);
      assertThat(withB).isNotNull();
      assertThat(withB.getResourcesList()).extracting(r -> r.getName()).contains("kvrouter_worker_b");
      req.onNext(DeltaDiscoveryRequest.newBuilder().setTypeUrl(CDS).setResponseNonce(withB.getNonce())
          .setErrorDetail(com.google.rpc.Status.newBuilder().setCode(3).setMessage("bad cluster")).build());
      awaitMissing(envoys, List.of("b"));

      fleet.replace(List.of(a, Worker.simple("b", "10.0.0.2", 8000, "m"), Worker.simple("c", "10.0.0.3", 8000, "m")));
      DeltaDiscoveryResponse next = got.poll(3, TimeUnit.SECONDS);
      assertThat(next).isNotNull();
      assertThat(next.getSystemVersionInfo()).isEqualTo(ClusterSnapshots.version(fleet.current()));
      assertThat(next.getResourcesList()).extracting(r -> r.getName())
          .contains("kvrouter_worker_b", "kvrouter_worker_c").doesNotContain("kvrouter_worker_a");
      req.onNext(DeltaDiscoveryRequest.newBuilder().setTypeUrl(CDS).setResponseNonce(next.getNonce()).build());
      awaitMissing(envoys, List.of());
      req.onCompleted();
    });
  }

  /** A delta ADS stream as Envoy opens it, whose first response (the fleet then) it has acknowledged. */
  private static StreamObserver<DeltaDiscoveryRequest> deltaAcceptingTheFirstFleet(ManagedChannel ch,
      LinkedBlockingQueue<DeltaDiscoveryResponse> got, EnvoyClusters envoys) throws InterruptedException {
    StreamObserver<DeltaDiscoveryRequest> req = AggregatedDiscoveryServiceGrpc.newStub(ch)
        .deltaAggregatedResources(new StreamObserver<>() {
          @Override public void onNext(DeltaDiscoveryResponse r) { got.add(r); }
          @Override public void onError(Throwable t) {}
          @Override public void onCompleted() {}
        });
    req.onNext(DeltaDiscoveryRequest.newBuilder().setNode(Node.newBuilder().setId("envoy-1")).setTypeUrl(CDS)
        .build());
    DeltaDiscoveryResponse first = got.poll(3, TimeUnit.SECONDS);
    assertThat(first).isNotNull();
    req.onNext(DeltaDiscoveryRequest.newBuilder().setTypeUrl(CDS).setResponseNonce(first.getNonce()).build());
    awaitMissing(envoys, List.of());
    return req;
  }

  /** Runs {@code body} against an xDS server serving worker a, over a channel to it. */
  private static void withWorkerA(WithServer body) throws Exception {
    WorkerRegistry fleet = new WorkerRegistry();
    fleet.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m")));
    try (XdsServer s = new XdsServer(fleet).start("127.0.0.1", 0)) {
      ManagedChannel ch = NettyChannelBuilder.forAddress("127.0.0.1", s.port()).usePlaintext().build();
      try {
        body.run(fleet, s.envoyClusters(), ch);
      } finally {
        ch.shutdownNow();
      }
    }
  }

  @FunctionalInterface
  private interface WithServer {
    void run(WorkerRegistry fleet, EnvoyClusters envoys, ManagedChannel ch) throws Exception;
  }

  private static void awaitMissing(EnvoyClusters envoys, List<String> expected) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (!envoys.missingWorkers().equals(new java.util.TreeSet<>(expected)) && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertThat(envoys.missingWorkers()).containsExactlyElementsOf(expected);
  }
}
