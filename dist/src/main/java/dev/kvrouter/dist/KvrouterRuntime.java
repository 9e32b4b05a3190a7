package dev.kvrouter.dist;

import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.extproc.routing.RoutingPolicy;
import dev.kvrouter.extproc.server.ExtProcOptions;
import dev.kvrouter.extproc.server.ExtProcServer;
import dev.kvrouter.extproc.server.RequestListener;
import dev.kvrouter.xds.registry.WorkerRegistry;
import dev.kvrouter.xds.registry.WorkersFileWatcher;
import dev.kvrouter.xds.server.XdsServer;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Everything the router runs, wired explicitly in one place: the fleet (workers file to registry), the xDS
 * server, the ext_proc server and the admin endpoints. Start order follows dependencies; {@link #close} stops
 * in reverse, letting in-flight ext_proc streams finish first.
 */
public final class KvrouterRuntime implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(KvrouterRuntime.class);

  /** Which servers this process runs. */
  public enum Mode {
    ALL,
    EXT_PROC,
    XDS;

    boolean extProc() {
      return this != XDS;
    }

    boolean xds() {
      return this != EXT_PROC;
    }
  }

  private final KvrouterConfig config;
  private final WorkerRegistry registry = new WorkerRegistry();
  private final PrometheusMeterRegistry metrics = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
  private final ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor(r -> {
    Thread t = new Thread(r, "kvrouter-scheduler");
    t.setDaemon(true);
    return t;
  });
  private WorkersFileWatcher watcher;
  private XdsServer xds;
  private ExtProcServer extProc;
  private AdminServer admin;

  private KvrouterRuntime(KvrouterConfig config) {
    this.config = config;
  }

  /**
   * Starts the servers of {@code mode}. {@code baseDir} resolves relative paths in the config (the directory of
   * kvrouter.yaml).
   */
  public static KvrouterRuntime start(KvrouterConfig config, Path baseDir, Mode mode) throws IOException {
    KvrouterRuntime rt = new KvrouterRuntime(config);
    try {
      rt.startServers(baseDir, mode);
    } catch (IOException | RuntimeException e) {
      rt.close();
      throw e;
    }
    return rt;
  }

  private void startServers(Path baseDir, Mode mode) throws IOException {
    var s = config.server();
    Path workersFile = baseDir.resolve(config.workers().file());
    watcher = new WorkersFileWatcher(workersFile, registry);
    watcher.loadInitial();
    watcher.start(scheduler, config.workers().pollIntervalMs());
    if (mode.xds()) {
      xds = new XdsServer(registry).start(s.bind(), s.xdsPort());
    }
    if (mode.extProc()) {
      Map<String, RoutingPolicy> policies = Policies.create();
      Router router = new Router(registry, policies.get(config.routing().policy()), policies, System::nanoTime);
      ExtProcOptions options = new ExtProcOptions(s.bind(), s.extProcPort(), config.limits().maxBodyBytes(),
          config.tenancy().header(), BodySendMode.valueOf(s.requestBodyMode()),
          BodySendMode.valueOf(s.requestBodyMode()) == BodySendMode.FULL_DUPLEX_STREAMED
              ? BodySendMode.FULL_DUPLEX_STREAMED
              : BodySendMode.STREAMED,
          config.limits().retryAfterSeconds(), Runtime.getRuntime().availableProcessors(), 16 * 1024);
      extProc = new ExtProcServer(options, router, RequestListener.NONE).start();
    }
    admin = new AdminServer(metrics, registry, () -> extProc != null || xds != null).start(s.bind(), s.adminPort());
    log.info("kvrouter started: mode={} workers={} ext_proc={} xds={} admin={}", mode,
        registry.current().all().size(), extProc == null ? "-" : extProc.port(), xds == null ? "-" : xds.port(),
        admin.port());
  }

  public WorkerRegistry registry() {
    return registry;
  }

  public WorkersFileWatcher watcher() {
    return watcher;
  }

  public XdsServer xds() {
    return xds;
  }

  /** The ext_proc server, or null when this process does not run one. */
  public ExtProcServer extProc() {
    return extProc;
  }

  /** Stops only the ext_proc server (tests of Envoy's fail-open path use this). */
  public void stopExtProc() throws InterruptedException {
    if (extProc != null) {
      extProc.close();
      extProc = null;
    }
  }

  @Override
  public void close() {
    try {
      stopExtProc();
      if (xds != null) {
        xds.close();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (admin != null) {
      admin.close();
    }
    if (watcher != null) {
      watcher.close();
    }
    scheduler.shutdownNow();
  }
}
