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
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
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
  private ExecutorService executor;
  private Server server;
  /** SERVING under every health name: started, and neither draining nor closed (the admin /health reads it). */
  private volatile boolean serving;

  public ExtProcServer(ExtProcOptions options, RequestPath path) {
    this.options = options;
    this.path = path;
  }

  public ExtProcServer start() throws IOException {
    AtomicInteger n = new AtomicInteger();
    ThreadFactory tf = r -> {
      Thread t = new Thread(r, "ext-proc-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
    // Routing of large bodies runs here: a fixed pool, because routing is CPU-bound and an unbounded pool under
    // a burst only adds contention. Everything else runs inline on the event loop (see RequestStream).
    executor = Executors.newFixedThreadPool(Math.max(2, options.threads()), tf);
    server = NettyServerBuilder.forAddress(new InetSocketAddress(options.bind(), options.port()))
        .directExecutor()
        // BUFFERED mode sends the whole body in one message. Accept messages up to twice the body limit (envoy.yaml
        // buffers at most 16 MiB = 2 x the 8 MiB default), so an oversized body gets the router's 413 rather than
        // a gRPC error that Envoy would fail open on, sending it to a worker after all.
        .maxInboundMessageSize((int) Math.min(Integer.MAX_VALUE - 1, 2L * options.maxBodyBytes() + 1024 * 1024))
        .addService(io.grpc.ServerInterceptors.intercept(new Service(), new RoleInterceptor()))
        .addService(health.getHealthService())
        .build()
        .start();
    for (String name : HEALTH_NAMES) {
      health.setStatus(name, ServingStatus.SERVING);
    }
    serving = true;
    log.info("ext_proc listening on {}:{}", options.bind(), port());
    return this;
  }

  public int port() {
    return server.getPort();
  }

  /**
   * Reports NOT_SERVING under every health name while streams are still served: health checkers (Envoy's router
   * cluster) take this replica out before {@link #close} refuses new streams.
   */
  public void drain() {
    serving = false;
    for (String name : HEALTH_NAMES) {
      health.setStatus(name, ServingStatus.NOT_SERVING);
    }
  }

  /** Stops taking new streams, lets open ones finish for a grace period, then cuts the rest. */
  @Override
  public void close() throws InterruptedException {
    if (server == null) {
      return;
    }
    serving = false;
    health.enterTerminalState();
    server.shutdown();
    if (!server.awaitTermination(10, TimeUnit.SECONDS)) {
      server.shutdownNow();
      server.awaitTermination(5, TimeUnit.SECONDS);
    }
    executor.shutdownNow();
  }

  /** True while the gRPC health reports SERVING: started and not yet draining or closing. */
  public boolean serving() {
    return serving;
  }

  public InFlight inFlight() {
    return inFlight;
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
        return new ObserverStream(responses, inFlight, path.listener(), options.truthCheckEvery());
      }
      return new RequestStream(responses, path, options, executor, inFlight);
    }
  }
}
