package dev.kvrouter.extproc.server;

import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.Server;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Envoy-facing gRPC server: {@code envoy.service.ext_proc.v3.ExternalProcessor} plus gRPC health under the
 * names Envoy and Gateway API Inference Extension health checks use.
 */
public final class ExtProcServer implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(ExtProcServer.class);

  /** The health names Envoy's and the Gateway API Inference Extension's checks ask for. */
  private static final String[] HEALTH_NAMES = {"", ExternalProcessorGrpc.SERVICE_NAME, "liveness", "readiness"};

  private final ExtProcOptions options;
  private final RequestPath path;
  private final HealthStatusManager health = new HealthStatusManager();
  private final InFlight inFlight = new InFlight(200_000, java.time.Duration.ofMinutes(10));
  private final Duration stallAfter;
  private final BodyBudget bodies;
  private final ExtProcMessages messages = new ExtProcMessages();
  private RoutingPool executor;
  private ScheduledExecutorService watchdog;
  private Server server;
  /** SERVING under every health name: started, not stalled, and neither draining nor closed (admin /health). */
  private volatile boolean serving;
  /** Draining or closed: health stays NOT_SERVING whatever the watchdog sees. */
  private volatile boolean leaving;
  private volatile boolean stalled;
  private final AtomicLong stalls = new AtomicLong();

  public ExtProcServer(ExtProcOptions options, RequestPath path) {
    this(options, path, Duration.ZERO, BodyBudget.UNLIMITED);
  }

  /**
   * @param stallAfter report NOT_SERVING while a request has waited longer than this for a routing thread, so
   *     Envoy's health check moves new requests to the other replicas or its fail-open path instead of into a queue
   *     the router is not keeping up with ({@code server.stall_ms}); zero: never
   * @param bodies the request bodies every stream may hold at once ({@code limits.max_buffered_body_bytes}); a
   *     request whose body would go over it gets 503
   */
  public ExtProcServer(ExtProcOptions options, RequestPath path, Duration stallAfter, BodyBudget bodies) {
    this.options = options;
    this.path = path;
    this.stallAfter = stallAfter;
    this.bodies = bodies;
  }

  public ExtProcServer start() throws IOException {
    return start(NettyServerBuilder.forAddress(new InetSocketAddress(options.bind(), options.port())));
  }

  /** Serves on {@code builder}'s transport: the listening socket, or an in-process one for tests. */
  ExtProcServer start(io.grpc.ServerBuilder<?> builder) throws IOException {
    AtomicInteger n = new AtomicInteger();
    ThreadFactory tf = r -> {
      Thread t = new Thread(r, "ext-proc-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
    // Routing of large bodies runs here: a fixed pool, because routing is CPU-bound and an unbounded pool under
    // a burst only adds contention. Everything else runs inline on the event loop (see RequestStream).
    executor = new RoutingPool(Math.max(2, options.threads()), tf);
    server = builder
        .directExecutor()
        // BUFFERED mode sends the whole body in one message. Accept messages up to twice the body limit (envoy.yaml
        // buffers at most 16 MiB = 2 x the 8 MiB default), so an oversized body gets the router's 413 rather than
        // a gRPC error that Envoy would fail open on, sending it to a worker after all.
        .maxInboundMessageSize((int) Math.min(Integer.MAX_VALUE - 1, 2L * options.maxBodyBytes() + 1024 * 1024))
        .addService(io.grpc.ServerInterceptors.intercept(DeferredMetadata.applyTo(new Service().bindService()),
            new RoleInterceptor(), messages))
        .addService(health.getHealthService())
        .build()
        .start();
    setHealth(true);
    if (!stallAfter.isZero()) {
      watchdog = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "ext-proc-watchdog");
        t.setDaemon(true);
        return t;
      });
      long every = Math.max(10, Math.min(250, stallAfter.toMillis() / 4));
      watchdog.scheduleWithFixedDelay(this::checkStall, every, every, TimeUnit.MILLISECONDS);
    }
    log.info("ext_proc listening on {}:{}", options.bind(), port());
    return this;
  }

  /**
   * Envoy's ext_proc filter puts no timeout on a FULL_DUPLEX_STREAMED exchange, so a router that answers health checks
   * (on the event loop) while its routing threads fall behind would hold every new request for as long as its queue.
   * Reporting NOT_SERVING while the oldest queued request has waited past {@code stallAfter} lets Envoy's health check
   * send new requests elsewhere (another replica, or unrouted to the pool) until the queue drains.
   */
  private void checkStall() {
    boolean now = executor.oldestWaitNanos(System.nanoTime()) > stallAfter.toNanos();
    if (now == stalled) {
      return;
    }
    synchronized (this) {
      stalled = now;
      if (leaving) {
        return;
      }
      if (now) {
        stalls.incrementAndGet();
        log.warn("a request has waited over {} ms for a routing thread: ext_proc health NOT_SERVING until the queue "
            + "drains (server.stall_ms)", stallAfter.toMillis());
      } else {
        log.info("routing queue drained: ext_proc health SERVING again");
      }
      setHealth(!now);
    }
  }

  private void setHealth(boolean up) {
    serving = up;
    for (String name : HEALTH_NAMES) {
      health.setStatus(name, up ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
    }
  }

  /** Whether the watchdog sees the routing threads behind (health NOT_SERVING for it). */
  public boolean stalled() {
    return stalled;
  }

  /** Times the watchdog reported the routing threads behind, since start. */
  public long stalls() {
    return stalls.get();
  }

  /** Seconds the oldest request waiting for a routing thread has waited; 0 when none waits. */
  public double routingQueueWaitSeconds() {
    RoutingPool e = executor;
    return e == null ? 0 : e.oldestWaitNanos(System.nanoTime()) / 1e9;
  }

  public int port() {
    return server.getPort();
  }

  /**
   * Reports NOT_SERVING under every health name while streams are still served: health checkers (Envoy's router
   * cluster) take this replica out before {@link #close} refuses new streams.
   */
  public synchronized void drain() {
    leaving = true;
    setHealth(false);
  }

  /** Stops taking new streams, lets open ones finish for a grace period, then cuts the rest. */
  @Override
  public void close() throws InterruptedException {
    if (server == null) {
      return;
    }
    synchronized (this) {
      leaving = true;
      serving = false;
    }
    if (watchdog != null) {
      watchdog.shutdownNow();
    }
    health.enterTerminalState();
    server.shutdown();
    if (!server.awaitTermination(10, TimeUnit.SECONDS)) {
      server.shutdownNow();
      server.awaitTermination(5, TimeUnit.SECONDS);
    }
    executor.shutdownNow();
  }

  /** True while the gRPC health reports SERVING: started, not stalled, and not yet draining or closing. */
  public boolean serving() {
    return serving;
  }

  public InFlight inFlight() {
    return inFlight;
  }

  /** The ext_proc messages received and sent since start, by stream and kind. */
  public ExtProcMessages messages() {
    return messages;
  }

  /**
   * gRPC initial metadata naming the stream's role. Envoy's routing ext_proc filter sends none; the response
   * observer filter ({@code observability_mode}) sends {@code x-kvrouter-role: observe} (envoy-config/*.yaml).
   */
  static final io.grpc.Metadata.Key<String> ROLE_HEADER =
      io.grpc.Metadata.Key.of("x-kvrouter-role", io.grpc.Metadata.ASCII_STRING_MARSHALLER);
  private static final io.grpc.Context.Key<String> ROLE = io.grpc.Context.key("kvrouter-role");

  private static final class RoleInterceptor implements io.grpc.ServerInterceptor {
    @Override
    public <Q, R> io.grpc.ServerCall.Listener<Q> interceptCall(io.grpc.ServerCall<Q, R> call,
        io.grpc.Metadata headers, io.grpc.ServerCallHandler<Q, R> next) {
      String role = headers.get(ROLE_HEADER);
      return role == null ? next.startCall(call, headers)
          : io.grpc.Contexts.interceptCall(io.grpc.Context.current().withValue(ROLE, role), call, headers, next);
    }
  }

  private final class Service extends ExternalProcessorGrpc.ExternalProcessorImplBase {
    @Override
    public StreamObserver<ProcessingRequest> process(StreamObserver<ProcessingResponse> responses) {
      if ("observe".equals(ROLE.get())) {
        return new ObserverStream(responses, inFlight, path.listener(), options.truthCheckEvery(), messages);
      }
      return new RequestStream(responses, path, options, executor, inFlight, bodies);
    }
  }
}
