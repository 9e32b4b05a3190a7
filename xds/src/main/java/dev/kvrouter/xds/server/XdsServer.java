package dev.kvrouter.xds.server;

import dev.kvrouter.xds.registry.WorkerRegistry;
import dev.kvrouter.xds.registry.WorkerSet;
import io.envoyproxy.controlplane.cache.v3.SimpleCache;
import io.envoyproxy.controlplane.cache.v3.Snapshot;
import io.envoyproxy.controlplane.server.DiscoveryServerCallbacks;
import io.envoyproxy.controlplane.server.V3DiscoveryServer;
import io.envoyproxy.envoy.service.discovery.v3.DeltaDiscoveryRequest;
import io.envoyproxy.envoy.service.discovery.v3.DeltaDiscoveryResponse;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryRequest;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryResponse;
import io.grpc.Server;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The xDS server: ADS (state of the world and delta) plus standalone CDS, serving one snapshot of the fleet to
 * every Envoy. Every registry change becomes a new snapshot version, which java-control-plane pushes to all
 * open watches.
 */
public final class XdsServer implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(XdsServer.class);
  /** All Envoys see the same fleet, so they share one node group. */
  static final String GROUP = "kvrouter";

  private final SimpleCache<String> cache = new RejectionAwareCache(node -> GROUP);
  private final WorkerRegistry registry;
  private final Consumer<WorkerSet> onFleet = this::publish;
  private final HealthStatusManager health = new HealthStatusManager();
  private Server server;
  private volatile boolean serving;
  private final java.util.concurrent.atomic.AtomicLong rejected = new java.util.concurrent.atomic.AtomicLong();
  private final java.util.concurrent.atomic.AtomicInteger streams = new java.util.concurrent.atomic.AtomicInteger();
  private final EnvoyClusters envoyClusters = new EnvoyClusters(System::nanoTime);
  private final ScheduledExecutorService forgetter = Executors.newSingleThreadScheduledExecutor(r -> {
    Thread t = new Thread(r, "kvrouter-xds-forget");
    t.setDaemon(true);
    return t;
  });

  public XdsServer(WorkerRegistry registry) {
    this.registry = registry;
  }

  /** Starts serving on {@code bind:port}; port 0 picks a free port (see {@link #port()}). */
  public XdsServer start(String bind, int port) throws IOException {
    registry.addListener(onFleet);
    V3DiscoveryServer discovery = new V3DiscoveryServer(List.of(new StreamWatch()), cache);
    server = NettyServerBuilder.forAddress(new InetSocketAddress(bind, port))
        .addService(discovery.getAggregatedDiscoveryServiceImpl())
        .addService(discovery.getClusterDiscoveryServiceImpl())
        .addService(health.getHealthService())
        .build()
        .start();
    health.setStatus("", ServingStatus.SERVING);
    long every = EnvoyClusters.REMEMBER_NANOS / 6;
    forgetter.scheduleWithFixedDelay(envoyClusters::forgetDeparted, every, every, TimeUnit.NANOSECONDS);
    serving = true;
    log.info("xDS server listening on {}:{}", bind, port());
    return this;
  }

  public int port() {
    return server.getPort();
  }

  /** True from a successful start until {@link #close} begins. */
  public boolean serving() {
    return serving;
  }

  /** The version Envoy should converge to; tests poll Envoy until it reports it. */
  public String currentVersion() {
    return ClusterSnapshots.version(registry.current());
  }

  private void publish(WorkerSet fleet) {
    Snapshot snapshot = ClusterSnapshots.snapshot(fleet);
    cache.setSnapshot(GROUP, snapshot);
    envoyClusters.published(fleet, snapshot);
    log.info("published xDS snapshot version={} workers={}", snapshot.clusters().version(), fleet.all().size());
  }

  @Override
  public void close() throws InterruptedException {
    serving = false;
    registry.removeListener(onFleet);
    forgetter.shutdownNow();
    if (server != null) {
      health.enterTerminalState();
      server.shutdown();
      if (!server.awaitTermination(5, TimeUnit.SECONDS)) {
        server.shutdownNow();
      }
    }
  }

  /**
   * Updates Envoy rejected (a NACK: the request carries {@code error_detail}) since start. Envoy keeps its last good
   * config then, so a rejected fleet change shows nowhere else but the log.
   */
  public long rejectedUpdates() {
    return rejected.get();
  }

  /** What the Envoys on this server's streams hold: the router routes to a worker once all of them hold it. */
  public EnvoyClusters envoyClusters() {
    return envoyClusters;
  }

  /** xDS streams open now: one per connected Envoy (ADS), more with standalone CDS. */
  public int openStreams() {
    return streams.get();
  }

  /** Counts and logs what Envoys do with the stream: opens, closes, rejected updates. */
  private final class StreamWatch implements DiscoveryServerCallbacks {
    /**
     * Each state-of-the-world stream's last response (nonce, version), by stream and type: java-control-plane reads
     * a NACK only of the last response, so that is the update it rejects.
     */
    private final java.util.concurrent.ConcurrentHashMap<String, Sent> lastSent =
        new java.util.concurrent.ConcurrentHashMap<>();

    @Override
    public void onV3StreamRequest(long streamId, DiscoveryRequest request) {
      envoyClusters.request(streamId, request);
      if (request.hasErrorDetail()) {
        Sent sent = lastSent.get(streamId + " " + request.getTypeUrl());
        if (sent != null && sent.nonce().equals(request.getResponseNonce())) {
          RejectionAwareCache.rejecting(request, sent.version());
        }
        rejected.incrementAndGet();
        log.error("Envoy rejected xDS {} version {}: {}", request.getTypeUrl(), request.getVersionInfo(),
            request.getErrorDetail().getMessage());
      }
    }

    @Override
    public void onV3StreamDeltaRequest(long streamId, DeltaDiscoveryRequest request) {
      envoyClusters.deltaRequest(streamId, request);
      if (request.hasErrorDetail()) {
        rejected.incrementAndGet();
        log.error("Envoy rejected delta xDS {}: {}", request.getTypeUrl(), request.getErrorDetail().getMessage());
      }
    }

    @Override
    public void onV3StreamResponse(long streamId, DiscoveryRequest request, DiscoveryResponse response) {
      lastSent.put(streamId + " " + response.getTypeUrl(), new Sent(response.getNonce(), response.getVersionInfo()));
      envoyClusters.response(streamId, response);
    }

    @Override
    public void onV3StreamDeltaResponse(long streamId, DeltaDiscoveryRequest request, DeltaDiscoveryResponse response) {
      envoyClusters.deltaResponse(streamId, response);
    }

    @Override
    public void onStreamOpen(long streamId, String typeUrl) {
      streams.incrementAndGet();
      envoyClusters.opened(streamId, typeUrl);
      log.info("xDS stream {} opened ({})", streamId, typeUrl.isEmpty() ? "ADS" : typeUrl);
    }

    @Override
    public void onStreamClose(long streamId, String typeUrl) {
      ended(streamId);
      log.info("xDS stream {} closed", streamId);
    }

    @Override
    public void onStreamCloseWithError(long streamId, String typeUrl, Throwable error) {
      ended(streamId);
      if (io.grpc.Status.fromThrowable(error).getCode() == io.grpc.Status.Code.CANCELLED) {
        log.info("xDS stream {} cancelled by the client", streamId); // Envoy restarting or shutting down
      } else {
        log.warn("xDS stream {} closed with error: {}", streamId, error.toString());
      }
    }

    /** A stream ended either way: its Envoy keeps its clusters, so EnvoyClusters remembers them for a while. */
    private record Sent(String nonce, String version) {}

    private void ended(long streamId) {
      lastSent.keySet().removeIf(k -> k.startsWith(streamId + " "));
      streams.decrementAndGet();
      envoyClusters.closed(streamId);
    }
  }
}
