package dev.kvrouter.dist;

import dev.kvrouter.extproc.decision.DecisionLog;
import dev.kvrouter.extproc.decision.DecisionMetrics;
import dev.kvrouter.extproc.decision.DecisionTracker;
import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.replicas.EnvoyGate;
import dev.kvrouter.extproc.replicas.ReplicaSync;
import dev.kvrouter.extproc.replicas.ZmqReplicaLink;
import dev.kvrouter.extproc.load.LoadMetrics;
import dev.kvrouter.extproc.load.LoadTracker;
import dev.kvrouter.extproc.load.MetricsScraper;
import dev.kvrouter.extproc.load.ScrapedLoadSource;
import dev.kvrouter.extproc.load.WorkerHealth;
import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.pipeline.PipelineResources;
import dev.kvrouter.extproc.pipeline.PromptPipeline;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.routing.KvIndexOverlapSource;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.extproc.routing.StaleViewTrust;
import dev.kvrouter.extproc.server.BodyBudget;
import dev.kvrouter.extproc.server.ExtProcMessages;
import dev.kvrouter.extproc.server.ExtProcOptions;
import dev.kvrouter.extproc.server.ExtProcServer;
import dev.kvrouter.extproc.server.InFlight;
import dev.kvrouter.extproc.server.RequestPath;
import dev.kvrouter.extproc.tenancy.SaltKey;
import dev.kvrouter.extproc.tenancy.TenantIsolation;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.KvIndexMetrics;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.events.EventPlaneHealth;
import dev.kvrouter.index.events.EventSource;
import dev.kvrouter.index.events.EventSubscriber;
import dev.kvrouter.index.events.SubscriberConfig;
import dev.kvrouter.index.wire.ZmqFrames;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import dev.kvrouter.xds.registry.WorkerSet;
import dev.kvrouter.xds.registry.WorkersFileWatcher;
import dev.kvrouter.xds.server.EnvoyClusters;
import dev.kvrouter.xds.server.XdsServer;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.function.ToIntFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Everything the router runs, wired explicitly in one place: the fleet (workers file to registry), the xDS
 * server, the KV index and its event plane, the request path (models, tenancy, prompt pipeline, router, load
 * accounting), the ext_proc server and the admin endpoints. Start order follows dependencies; {@link #close} stops
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
  private JvmGcMetrics gcMetrics;
  private final ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor(r -> {
    Thread t = new Thread(r, "kvrouter-scheduler");
    t.setDaemon(true);
    return t;
  });
  // Tokenizer and template loads take up to seconds: one thread of their own, off the request threads.
  private final ExecutorService modelLoader = Executors.newSingleThreadExecutor(r -> {
    Thread t = new Thread(r, "kvrouter-model-loader");
    t.setDaemon(true);
    return t;
  });
  // Finishes early-stopped prompts after their decision (predicted entries): bounded, the rest is dropped.
  private final ThreadPoolExecutor background = new ThreadPoolExecutor(1, 1, 0, TimeUnit.MILLISECONDS,
      new ArrayBlockingQueue<>(1024), r -> {
        Thread t = new Thread(r, "kvrouter-prompt-completion");
        t.setDaemon(true);
        return t;
      });
  private final Clock clock = Clock.systemUTC();
  private KvIndex index;
  private EventSubscriber events;
  private ModelRegistry models;
  private WorkersFileWatcher watcher;
  private XdsServer xds;
  private ExtProcServer extProc;
  private AdminServer admin;
  private LoadLedger ledger;
  private ZmqReplicaLink replicaLink;
  /** Where relative paths of the config resolve (kvrouter.yaml's directory); set by startServers. */
  private Path baseDir;
  private ReplicaSync replicaSync;
  /** Which workers every Envoy known here or to another replica holds; the router reads it (null in xds mode). */
  private EnvoyGate envoyGate;
  private MetricsScraper scraper;
  private DecisionTracker tracker;
  /** Filled by the tracker's usage reports and the event plane's stale transitions; read by the router. */
  private StaleViewTrust staleViewTrust = StaleViewTrust.NONE;
  private Consumer<WorkerSet> fleetListener;
  private Consumer<WorkerSet> indexListener;
  /** Set when a drain or the close begins: the admin /health answers 503 from then on. */
  private volatile boolean closing;

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
    this.baseDir = baseDir;
    var s = config.server();
    // The process's own cost beside the router's counters: heap, GC, threads and CPU, as operators of any JVM
    // service expect (jvm_*, process_*, system_*), so memory bounds and CPU starvation are visible in one place.
    new JvmMemoryMetrics().bindTo(metrics);
    new JvmThreadMetrics().bindTo(metrics);
    new ProcessorMetrics().bindTo(metrics);
    new UptimeMetrics().bindTo(metrics);
    gcMetrics = new JvmGcMetrics();
    gcMetrics.bindTo(metrics);
    Path workersFile = baseDir.resolve(config.workers().file());
    watcher = new WorkersFileWatcher(workersFile, registry).bindTo(metrics);
    try {
      watcher.loadInitial();
    } catch (IOException e) {
      throw new StartFailure("workers.file (" + workersFile + ")", e);
    }
    watcher.start(scheduler, config.workers().pollIntervalMs());
    if (mode.xds()) {
      XdsServer server = new XdsServer(registry);
      xds = bound("server.xds_port", s.bind(), s.xdsPort(), () -> server.start(s.bind(), s.xdsPort()));
      FunctionCounter.builder("kvrouter.xds.rejected", server, XdsServer::rejectedUpdates)
          .description("xDS updates an Envoy rejected (NACK; it keeps its last good config, the log says why)")
          .register(metrics);
      io.micrometer.core.instrument.Gauge.builder("kvrouter.xds.streams", server, XdsServer::openStreams)
          .description("xDS streams open: one per connected Envoy (ADS)")
          .register(metrics);
      io.micrometer.core.instrument.Gauge.builder("kvrouter.xds.envoys", server.envoyClusters(),
              EnvoyClusters::envoys)
          .description("Envoys whose clusters are known: on an xDS stream now, or closed within the last minute")
          .register(metrics);
      if (!mode.extProc()) {
        // a process that routes registers this gauge over its EnvoyGate instead (its peers' Envoys count too)
        io.micrometer.core.instrument.Gauge.builder("kvrouter.workers.not.in.envoy", server.envoyClusters(),
                c -> c.missing(registry.current()).size())
            .description("workers some Envoy on this xDS server does not hold yet")
            .register(metrics);
        shareEnvoysView();
      }
    }
    if (mode.extProc()) {
      SegmentCache segments = SegmentCache.create(SegmentCache.DEFAULT_MAX_TOKENS);
      segments.bindTo(metrics, "kvrouter_tokenizer_segments");
      models = ModelRegistry.create(config.models(), baseDir, PipelineResources.loader(segments, clock), modelLoader,
          System::nanoTime, metrics);
      models.preload();
      if (config.events().staleViewTrust()) {
        staleViewTrust = new StaleViewTrust().bindTo(metrics);
      }
      PrefixOverlapSource overlaps = startIndex(); // after the models: event sources take their block size
      var rl = config.routing().load();
      ledger = new LoadLedger(System::nanoTime, TimeUnit.SECONDS.toNanos(rl.reservationTtlSeconds()),
          rl.maxReservations());
      EnvoyClusters own = xds == null ? null : xds.envoyClusters();
      envoyGate = new EnvoyGate(own == null ? null : own::holding, registry::current);
      overlaps = startReplicas(overlaps); // before the request path and the router take the overlaps
      if (own == null && config.replicas().bind().isEmpty()) {
        log.warn("ext_proc without an xDS server or replicas.bind: this router hears nothing of what the Envoys hold "
            + "and routes to a new worker as soon as it reads workers.yaml, before Envoy has its cluster "
            + "(docs/routing.md, \"A new worker joins once Envoy has it\")");
      }
      if (own != null) {
        EnvoyGate gate = envoyGate;
        ReplicaSync sync = replicaSync;
        own.onChange(() -> {
          gate.ownChanged();
          if (sync != null) {
            sync.sendEnvoys();
          }
        });
        gate.ownChanged(); // what the Envoys acknowledged before the listener was there
      }
      EnvoyGate gate = envoyGate;
      io.micrometer.core.instrument.Gauge.builder("kvrouter.workers.not.in.envoy", gate,
              g -> g.missing(registry.current()).size())
          .description("workers some Envoy does not hold yet (one on this xDS server, or one another router replica "
              + "knows); routed to once every one does")
          .register(metrics);
      var t = config.tenancy();
      SaltKey key = SaltKey.load(t.secretFile() == null ? null : baseDir.resolve(t.secretFile()), t.secretEnv(),
          System::getenv);
      TenantIsolation tenancy = new TenantIsolation(key, t.shareAcrossTenants());
      log.info("tenancy: header={} share_across_tenants={} salts keyed by {}", t.header(), t.shareAcrossTenants(),
          key.secret() ? "the configured secret" : "the public seed (set tenancy.secret_file for keyed salts)");
      RequestPreparer preparer = new RequestPreparer(models, tenancy, System::nanoTime,
          config.limits().maxStopStrings());
      PromptPipeline pipeline = new PromptPipeline(overlaps, background, System::nanoTime,
          config.events().earlyStop(), metrics);
      ExtProcOptions options = new ExtProcOptions(s.bind(), s.extProcPort(), config.limits().maxBodyBytes(),
          t.header(), BodySendMode.valueOf(s.requestBodyMode()),
          BodySendMode.valueOf(s.requestBodyMode()) == BodySendMode.FULL_DUPLEX_STREAMED
              ? BodySendMode.FULL_DUPLEX_STREAMED
              : BodySendMode.STREAMED,
          config.limits().retryAfterSeconds(), Runtime.getRuntime().availableProcessors(), 16 * 1024,
          config.observability().truthCheckEvery(), Set.copyOf(t.passThroughPaths()), t.saltMessagesApi());
      Router router = routing(overlaps);
      BodyBudget bodies = new BodyBudget(config.limits().bufferedBodyBudget(Runtime.getRuntime().maxMemory()));
      log.info("request bodies held at once: at most {} MiB (limits.max_buffered_body_bytes)",
          bodies.capacity() >> 20);
      ExtProcServer server = new ExtProcServer(options, new RequestPath(preparer, pipeline, router, tracker),
          java.time.Duration.ofMillis(s.stallMs()), bodies);
      extProc = bound("server.ext_proc_port", s.bind(), s.extProcPort(), server::start);
      InFlight inFlight = extProc.inFlight();
      // the scheduler's bookkeeping, beside the ledger's sweeps: requests whose observer never came (docs/ext-proc.md)
      scheduler.scheduleWithFixedDelay(() -> {
        try {
          inFlight.endOrphans(System.nanoTime(), InFlight.ORPHAN_GRACE_NANOS);
        } catch (RuntimeException e) {
          log.error("ending unclaimed requests failed", e);
        }
      }, 250, 250, TimeUnit.MILLISECONDS);
      ExtProcServer ext = extProc;
      io.micrometer.core.instrument.Gauge.builder("kvrouter.routing.queue.wait", ext,
              ExtProcServer::routingQueueWaitSeconds)
          .description("how long the oldest request waiting for a routing thread has waited (0: none waits)")
          .baseUnit("seconds")
          .register(metrics);
      io.micrometer.core.instrument.Gauge.builder("kvrouter.request.bodies.buffered", bodies, BodyBudget::used)
          .description("bytes of request bodies the router holds now, at most limits.max_buffered_body_bytes")
          .baseUnit("bytes")
          .register(metrics);
      io.micrometer.core.instrument.Gauge.builder("kvrouter.ext_proc.stalled", ext, e -> e.stalled() ? 1 : 0)
          .description("1 while a request has waited over server.stall_ms for a routing thread (health NOT_SERVING)")
          .register(metrics);
      registerMessages(metrics, ext.messages());
      FunctionCounter.builder("kvrouter.ext_proc.stalls", ext, ExtProcServer::stalls)
          .description("times the routing threads fell over server.stall_ms behind (health NOT_SERVING meanwhile)")
          .register(metrics);
      io.micrometer.core.instrument.Gauge.builder("kvrouter.observer.pending", inFlight, InFlight::pending)
          .description("routed requests awaiting their response observer (at most 200,000, each 10 minutes at most)")
          .register(metrics);
      io.micrometer.core.instrument.Gauge.builder("kvrouter.observer.orphans", inFlight, InFlight::orphansWaiting)
          .description("closed routing streams whose decision waits for its response observer (at most 200,000)")
          .register(metrics);
      // What following responses costs: one message per chunk while the observer follows a response.
      FunctionCounter.builder("kvrouter.observer.messages", inFlight, InFlight::observerMessages)
          .description("messages from Envoy's response observer filter (one per response chunk followed)")
          .register(metrics);
      FunctionCounter.builder("kvrouter.observer.left", inFlight, InFlight::left)
          .description("streamed responses left after their first chunk (outside observability.truth_check_every)")
          .register(metrics);
      FunctionCounter.builder("kvrouter.observer.followed.for.end", inFlight, InFlight::followedForTheEnd)
          .description("streamed responses followed to the end because Envoy had closed the routing stream "
              + "(routing filter without response trailers)")
          .register(metrics);
      FunctionCounter.builder("kvrouter.observer.missing", inFlight, InFlight::observerMissing)
          .description("requests ended at their routing stream's close because no response observer claimed them "
              + "(the observer went to another router replica, or no observer filter)")
          .register(metrics);
      FunctionCounter.builder("kvrouter.observer.late", inFlight, InFlight::lateObservers)
          .description("response observers that came for a request already ended at its routing stream's close "
              + "(a routing filter that closes its stream before the response; ending stops at the first)")
          .register(metrics);
      FunctionCounter.builder("kvrouter.observer.reused.ids", inFlight, InFlight::reusedIds)
          .description("requests that came with the x-request-id of a request still in flight and were given a "
              + "fresh decision id (id~seq)")
          .register(metrics);
    }
    // 200 only while this process serves what its mode runs: the ext_proc health (SERVING until a drain starts)
    // or, xDS-only, the xDS server until it closes. A probe must see a draining replica as going away, and a router
    // whose preloaded models still load as not ready yet: it routes their requests by load alone meanwhile, and an
    // orchestrator rolling the replicas waits on this before it stops the next one.
    java.util.function.BooleanSupplier serving = mode.extProc()
        ? () -> {
          ExtProcServer e = extProc; // null once stopped
          ModelRegistry m = models;
          return !closing && e != null && e.serving() && (m == null || m.preloaded());
        }
        : () -> {
          XdsServer x = xds;
          return !closing && x != null && x.serving();
        };
    admin = bound("server.admin_port", s.bind(), s.adminPort(),
        () -> new AdminServer(metrics, registry, serving).start(s.bind(), s.adminPort()));
    log.info("kvrouter started: mode={} workers={} ext_proc={} xds={} admin={}", mode,
        registry.current().all().size(), extProc == null ? "-" : extProc.port(), xds == null ? "-" : xds.port(),
        admin.port());
  }

  /** A start step that can fail on I/O (binding a port, reading a file). */
  private interface IoStep<T> {
    T run() throws IOException;
  }

  /** Starts a listener, naming the setting and address when it cannot bind (the cause alone says neither). */
  private static <T> T bound(String setting, String bind, int port, IoStep<T> start) throws IOException {
    try {
      return start.run();
    } catch (IOException e) {
      throw new StartFailure(setting + " (" + Worker.hostPort(bind, port) + ")", e);
    }
  }

  /**
   * A start that failed on I/O, naming the setting and the address or file it concerns; the message is one line
   * for the operator: {@code server.admin_port (127.0.0.1:9090): java.net.BindException: Address already in use}.
   */
  public static final class StartFailure extends IOException {
    StartFailure(String what, IOException cause) {
      super(what + ": " + describe(cause), cause);
    }

    /** The class and message of {@code e} and of its innermost cause, when that says more. */
    static String describe(Throwable e) {
      Throwable root = e;
      while (root.getCause() != null && root.getCause() != root) {
        root = root.getCause();
      }
      String d = e.getClass().getName() + ": " + e.getMessage();
      if (root != e) {
        d += " (" + root.getClass().getName() + ": " + root.getMessage() + ")";
      }
      return d.replace('\n', ' ');
    }
  }

  /**
   * With {@code replicas.bind} set, this router tells the other replicas of its reservations and predictions and
   * copies theirs into its ledger and index (docs/routing.md, "Several router replicas"). Returns the overlaps to
   * route on: {@code overlaps} itself, or a view that also shares each prediction.
   */
  private PrefixOverlapSource startReplicas(PrefixOverlapSource overlaps) {
    var rc = config.replicas();
    if (rc.bind().isEmpty()) {
      return overlaps;
    }
    ReplicaSync sync = joinReplicas((id, outbox, timeout) -> new ReplicaSync(id, ledger, overlaps, outbox,
        System::nanoTime, timeout, envoyGate));
    ledger.setListener(sync.ledgerListener());
    log.info("router replica {}: sharing reservations, predictions{} on {} with {}", Long.toHexString(
        sync.replica()), envoyGate.servesXds() ? " and what its Envoys hold" : "", rc.bind(), rc.peers());
    return sync.sharing(overlaps);
  }

  /**
   * The {@code xds} mode with {@code replicas.bind} set: this process routes nothing, but its Envoys' xDS streams
   * come here, so it tells the routers over the replica link what those Envoys hold; routers in {@code ext-proc}
   * mode would otherwise route to a new worker the moment they read workers.yaml (docs/routing.md, "A new worker
   * joins once Envoy has it").
   */
  private void shareEnvoysView() {
    var rc = config.replicas();
    if (rc.bind().isEmpty()) {
      log.warn("xDS server without replicas.bind: routers in ext-proc mode hear nothing of what its Envoys hold and "
          + "route to a new worker as soon as they read workers.yaml, before Envoy has its cluster (docs/routing.md, "
          + "\"A new worker joins once Envoy has it\")");
      return;
    }
    EnvoyClusters own = xds.envoyClusters();
    EnvoyGate view = new EnvoyGate(own::holding, registry::current);
    ReplicaSync sync = joinReplicas((id, outbox, timeout) -> ReplicaSync.viewOnly(id, outbox, System::nanoTime,
        timeout, view));
    own.onChange(sync::sendEnvoys);
    log.info("xDS server, replica link member {}: sharing what its Envoys hold (nothing of the routers' load) on {} "
        + "with {}", Long.toHexString(sync.replica()), rc.bind(), rc.peers());
  }


  /** Whether {@code endpoint} ({@code tcp://<host>:<port>}) binds a loopback address only. */
  static boolean loopback(String endpoint) {
    String host = endpoint.substring("tcp://".length(), endpoint.lastIndexOf(':'));
    if (host.equals("localhost") || host.equals("[::1]") || host.equals("::1")) {
      return true;
    }
    try {
      return host.matches("[0-9.]+") && java.net.InetAddress.getByName(host).isLoopbackAddress();
    } catch (java.net.UnknownHostException e) {
      return false;
    }
  }

  /** Makes this process's member of the replica link, given its identity, its outbox and the peer timeout. */
  @FunctionalInterface
  private interface Member {
    ReplicaSync create(long replica, Consumer<byte[]> outbox, long peerTimeoutNanos);
  }

  /** Starts the replica link with {@code member} on it, and its metrics. */
  private ReplicaSync joinReplicas(Member member) {
    var rc = config.replicas();
    dev.kvrouter.extproc.replicas.CurveKeys curve = null;
    if (rc.curve().enabled()) {
      // an IllegalArgumentException naming the setting and the file, never the key: kvrouter cannot start
      curve = dev.kvrouter.extproc.replicas.CurveKeys.load(baseDir.resolve(rc.curve().secretKeyFile()),
          rc.curve().publicKeyFile() == null ? null : baseDir.resolve(rc.curve().publicKeyFile()));
    } else if (!loopback(rc.bind())) {
      log.warn("replicas.bind {} is not a loopback address and replicas.curve is not set: anyone who reaches it reads "
          + "this replica's reservations and the block hashes of its prompts, and a process at a peer's address is "
          + "trusted with its own (docs/operations.md, \"Securing the replica link\")", rc.bind());
    }
    replicaLink = new ZmqReplicaLink(rc.bind(), rc.peers(), rc.maxQueued(),
        java.time.Duration.ofMillis(rc.resolveIntervalMs()), curve);
    ReplicaSync sync = member.create(new java.security.SecureRandom().nextLong(), replicaLink,
        TimeUnit.MILLISECONDS.toNanos(rc.peerTimeoutMs()));
    replicaSync = sync;
    try {
      replicaLink.start(sync);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while binding " + rc.bind(), e);
    }
    FunctionCounter.builder("kvrouter.replicas.sent", sync, ReplicaSync::sent)
        .description("messages this member sent the others (reservations, releases, predictions, its Envoys' view)")
        .register(metrics);
    FunctionCounter.builder("kvrouter.replicas.dropped", replicaLink, ZmqReplicaLink::dropped)
        .description("messages to the other router replicas dropped because the send queue was full")
        .register(metrics);
    io.micrometer.core.instrument.Gauge.builder("kvrouter.replicas.endpoints", replicaLink, ZmqReplicaLink::following)
        .description("peer endpoints followed: every address replicas.peers resolve to, this replica's own left out")
        .register(metrics);
    io.micrometer.core.instrument.Gauge.builder("kvrouter.replicas.queued", replicaLink, ZmqReplicaLink::queued)
        .description("messages waiting to be sent to the other replicas (at most replicas.max_queued)")
        .register(metrics);
    io.micrometer.core.instrument.Gauge.builder("kvrouter.replicas.queued.bytes", replicaLink,
            ZmqReplicaLink::queuedBytes)
        .description("bytes of the messages waiting to be sent to the other replicas (at most 128 MiB)")
        .baseUnit("bytes").register(metrics);
    FunctionCounter.builder("kvrouter.replicas.refused", replicaLink, ZmqReplicaLink::refused)
        .description("subscribers refused by replicas.curve's handshake: they knew the link's public key but hold "
            + "another key pair (one without CURVE or without the public key fails earlier, uncounted)")
        .register(metrics);
    FunctionCounter.builder("kvrouter.replicas.gaps", sync, ReplicaSync::gaps)
        .description("gaps seen in another member's message sequence numbers (messages lost on the link: a send "
            + "queue full, a high-water mark, a reconnect); each asks that member for its whole state")
        .register(metrics);
    FunctionCounter.builder("kvrouter.replicas.missed", sync, ReplicaSync::missed)
        .description("other members' messages lost on the link, as their sequence numbers tell")
        .register(metrics);
    FunctionCounter.builder("kvrouter.replicas.resyncs", sync, ReplicaSync::resyncs)
        .description("whole states received after a gap: the member's copies here replaced by what it holds")
        .register(metrics);
    FunctionCounter.builder("kvrouter.replicas.stale.released", sync, ReplicaSync::staleReleased)
        .description("copied reservations released because their member's whole state no longer had them (their "
            + "release was lost), instead of at the ledger's expiry")
        .register(metrics);
    io.micrometer.core.instrument.Gauge.builder("kvrouter.replicas.peers", sync, ReplicaSync::peerCount)
        .description("other members of the replica link heard from within replicas.peer_timeout_ms: router "
            + "replicas, and xds-mode processes that share their Envoys' view")
        .register(metrics);
    return sync;
  }

  /**
   * The routing side: load ledger, worker health, metrics scraper, the router and the tracker that follows each
   * request. The scheduler thread owns the ledger's sweeps; the scraper owns its HTTP thread.
   */
  private Router routing(PrefixOverlapSource overlaps) {
    var r = config.routing();
    long ttl = TimeUnit.SECONDS.toNanos(r.load().reservationTtlSeconds());
    WorkerHealth health = new WorkerHealth(System::nanoTime, r.health().unreachableAfter(),
        r.health().ejectAfterErrors(), TimeUnit.SECONDS.toNanos(r.health().ejectSeconds()),
        TimeUnit.SECONDS.toNanos(r.health().ejectMaxSeconds()));
    ScrapedLoadSource scraped = ScrapedLoadSource.NONE;
    if (r.scrape().enabled()) {
      scraper = new MetricsScraper(registry, ledger, health, System::nanoTime,
          Duration.ofMillis(r.scrape().timeoutMs()), r.scrape().maxBytes(), r.scrape().filter());
      scraped = scraper;
    }
    LoadTracker load = new LoadTracker(ledger, scraped, System::nanoTime,
        TimeUnit.MILLISECONDS.toNanos(r.scrape().maxAgeMs()));
    LoadMetrics loadMetrics = new LoadMetrics(metrics, ledger, health, scraper);
    DecisionMetrics decisionMetrics = new DecisionMetrics(metrics);
    LoadLedger l = ledger;
    ModelRegistry configured = models;
    fleetListener = fleet -> {
      List<WorkerId> ids = new ArrayList<>();
      Set<String> names = new HashSet<>();
      Set<String> served = new HashSet<>();
      for (Worker w : fleet.all()) {
        ids.addAll(w.cacheOwners());
        names.add(w.name());
        served.add(w.model());
        served.addAll(w.adapters());
      }
      configured.fleetServes(served);
      l.retain(new HashSet<>(ids));
      health.retain(names);
      loadMetrics.fleetChanged(fleet);
      decisionMetrics.retain(fleet.all());
      envoyGate.fleetChanged();
    };
    registry.addListener(fleetListener);
    Router router = Router.builder(registry)
        .policies(Policies.create())
        .config(RoutingSettings.toConfig(r))
        .evictionSlots(r.load().evictionSlots())
        .overlaps(overlaps)
        .load(load)
        .health(health)
        .staleViewTrust(staleViewTrust)
        .inEnvoy(envoyGate::holds)
        .build();
    tracker = new DecisionTracker(ledger, health, staleViewTrust,
        DecisionLog.toLogger(r.decisionLog().maxCandidates(), r.decisionLog().enabled()),
        decisionMetrics, System::nanoTime, r.load().maxReservations(), ttl);
    io.micrometer.core.instrument.Gauge.builder("kvrouter.requests.followed", tracker, DecisionTracker::tracking)
        .description("routed requests followed for their release, truth check and records (at most "
            + "routing.load.max_reservations)")
        .register(metrics);
    DecisionTracker t = tracker;
    scheduler.scheduleWithFixedDelay(() -> {
      try {
        l.sweep();
        t.sweep();
      } catch (RuntimeException e) {
        log.error("load ledger sweep failed", e);
      }
    }, r.load().sweepIntervalMs(), r.load().sweepIntervalMs(), TimeUnit.MILLISECONDS);
    if (scraper != null) {
      scraper.start(scheduler, r.scrape().intervalMs());
    }
    return router;
  }

  /**
   * The KV index and, when enabled, the event plane that fills it: one event source per worker and data-parallel
   * rank with an {@code events} endpoint, reconciled on every fleet change; workers that leave are purged. The
   * scheduler thread drains predicted entries and expires them.
   */
  private PrefixOverlapSource startIndex() {
    var e = config.events();
    IndexConfig ic = IndexConfig.defaults().withMaxEntries(e.maxIndexEntries(), 16_384)
        .withPredictions(Duration.ofMillis(e.predictedTtlMs()), Duration.ofMillis(e.approximateTtlMs()), 1 << 20,
            4096).withPrefixJump(e.prefixJump()).withMedia(e.mediaIdentities().toConfig());
    index = new KvIndex(ic, clock);
    KvIndexMetrics.bind(index, metrics);
    index.scheduleMaintenance(scheduler, Duration.ofMillis(100));
    if (e.enabled()) {
      EventPlaneHealth health = new EventPlaneHealth(metrics, clock, Duration.ofMillis(e.staleRecoveryMs()));
      health.addListener((worker, stale, reason) -> log.warn("worker {} event view {}: {}", worker,
          stale ? "stale, routing it by predicted entries and what usage confirms" : "trusted again", reason));
      health.addListener(staleViewTrust::staleChanged);
      AtomicInteger n = new AtomicInteger();
      events = new EventSubscriber(index, health, SubscriberConfig.defaults().withShards(e.subscriberThreads())
          .withMaxMessageBytes(e.maxMessageBytes()),
          clock, r -> {
            Thread th = new Thread(r, "kvrouter-events-" + n.incrementAndGet());
            th.setDaemon(true);
            return th;
          });
      events.start();
      // messages no followed source can claim: on a bound socket shared by several engines, the topic names none of
      // them, or a message over events.max_message_bytes cannot be traced to one
      FunctionCounter.builder("kvrouter.events.unroutable", events, EventSubscriber::unroutableMessages)
          .description("KV event messages on a shared bound socket whose topic names no followed worker")
          .register(metrics);
      FunctionCounter.builder("kvrouter.events.oversize.shared", events, EventSubscriber::oversizeSharedMessages)
          .description("KV event messages over events.max_message_bytes on a bound socket several engines share")
          .register(metrics);
    }
    KvIndex idx = index;
    EventSubscriber sub = events;
    Set<String> walkModels = Set.copyOf(e.walkModels());
    ToIntFunction<Worker> blockSize = w -> w.blockSize() > 0 ? w.blockSize()
        : models == null ? 16 : models.resolve(w.model()).blockSize();
    indexListener = fleet -> {
      Set<WorkerId> owners = new HashSet<>();
      for (Worker w : fleet.all()) {
        owners.addAll(w.cacheOwners());
      }
      // before the removals below: from now on no prediction (an in-flight request's, a late background one)
      // registers a worker that left
      idx.setFleet(owners);
      if (sub != null) {
        // purges the index views of sources that are gone
        sub.reconcile(eventSources(fleet, blockSize, walkModels, (w, err) -> log.error("worker {}: its events "
            + "cannot be followed, routing it on predicted entries: {}", w.name(), err.getMessage())));
      }
      for (WorkerId id : idx.workers()) {
        if (!owners.contains(id) && (sub == null || !sub.sources().containsKey(id))) {
          idx.remove(id); // left the fleet: forget its predicted entries too
        }
      }
    };
    registry.addListener(indexListener);
    return new KvIndexOverlapSource(index);
  }

  /**
   * One event source per worker and data-parallel rank with an {@code events} endpoint. A worker whose sources
   * cannot be built (an endpoint that rank offsets cannot apply to: workers.yaml rejects those, the registry's other
   * sources may not) is left out and reported, so it is routed like a worker without events; throwing instead would
   * leave every other worker of this fleet version unreconciled while xDS already serves it.
   */
  static List<EventSource> eventSources(WorkerSet fleet, ToIntFunction<Worker> blockSize, Set<String> walkModels,
      BiConsumer<Worker, RuntimeException> skipped) {
    List<EventSource> sources = new ArrayList<>();
    for (Worker w : fleet.all()) {
      var ev = w.events();
      if (ev == null) {
        continue;
      }
      List<EventSource> own = new ArrayList<>();
      try {
        for (WorkerId id : w.cacheOwners()) {
          own.add(new EventSource(id, w.model(), blockSize.applyAsInt(w),
              ZmqFrames.offsetEndpoint(ev.endpoint(), id.dpRank()), ev.replayEndpoint() == null ? null
              : ZmqFrames.offsetEndpoint(ev.replayEndpoint(), id.dpRank()), ev.topic(), ev.bind(),
              walkModels.contains(w.model())));
        }
      } catch (RuntimeException e) {
        skipped.accept(w, e);
        continue;
      }
      sources.addAll(own);
    }
    return sources;
  }

  /** The KV index (null in xds-only mode). */
  public KvIndex index() {
    return index;
  }

  /** The load ledger (null in xds-only mode). */
  public LoadLedger ledger() {
    return ledger;
  }

  public WorkerRegistry registry() {
    return registry;
  }

  /** The model registry, or null when this process runs no ext_proc server. */
  public ModelRegistry models() {
    return models;
  }

  public WorkersFileWatcher watcher() {
    return watcher;
  }

  public XdsServer xds() {
    return xds;
  }

  /** Which workers every Envoy known here or to another replica holds (null when this process routes nothing). */
  public EnvoyGate envoyGate() {
    return envoyGate;
  }

  /**
   * Messages per ext_proc stream and kind: what the gRPC transport (a third of the router's CPU through Envoy) is
   * spent on, and what a config change that adds messages per request shows in first.
   */
  private static void registerMessages(io.micrometer.core.instrument.MeterRegistry metrics,
      ExtProcMessages messages) {
    for (var stream : ExtProcMessages.Stream.values()) {
      for (var kind : io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.values()) {
        if (kind != io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.REQUEST_NOT_SET) {
          registerMessages(metrics, messages, stream, "received", kind, m -> m.received(stream, kind));
        }
      }
      for (var kind : io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse.ResponseCase.values()) {
        if (kind != io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse.ResponseCase.RESPONSE_NOT_SET) {
          registerMessages(metrics, messages, stream, "sent", kind, m -> m.sent(stream, kind));
        }
      }
      FunctionCounter.builder("kvrouter.ext_proc.metadata.parsed", messages, m -> m.metadataBytes(stream))
          .description("bytes of Envoy-forwarded metadata (metadata_context, envoy.lb) the router parsed")
          .baseUnit("bytes")
          .tags("stream", stream.label())
          .register(metrics);
    }
  }

  private static void registerMessages(io.micrometer.core.instrument.MeterRegistry metrics, ExtProcMessages messages,
      ExtProcMessages.Stream stream, String direction, Enum<?> kind,
      java.util.function.ToDoubleFunction<ExtProcMessages> count) {
    FunctionCounter.builder("kvrouter.ext_proc.messages", messages, count)
        .description("ext_proc messages from Envoy (received) and answers to it (sent), by stream and kind")
        .tags("stream", stream.label(), "direction", direction, "kind", ExtProcMessages.label(kind))
        .register(metrics);
  }

  /** The Prometheus text the admin server's /metrics serves. */
  public String metricsText() {
    return metrics.scrape();
  }

  /** The ext_proc server, or null when this process does not run one. */
  public ExtProcServer extProc() {
    return extProc;
  }

  /**
   * Leaves the router cluster before stopping: the ext_proc health reports NOT_SERVING for {@code drain} while the
   * router still routes, so Envoy's next health check moves this replica's share to the others instead of its
   * requests failing open to the pool once the port closes. Returns at once without an ext_proc service.
   */
  public void drain(java.time.Duration drain) throws InterruptedException {
    closing = true;
    ExtProcServer s = extProc;
    if (s == null || drain.isZero()) {
      return;
    }
    s.drain();
    log.info("draining: ext_proc health NOT_SERVING for {} ms before the router stops", drain.toMillis());
    Thread.sleep(drain.toMillis());
  }

  /** Stops only the ext_proc server (tests of Envoy's fail-open path use this). */
  public void stopExtProc() throws InterruptedException {
    if (extProc != null) {
      extProc.close();
      extProc = null;
    }
    if (xds != null) {
      xds.envoyClusters().onChange(() -> { }); // no router, no replica link to tell any more
    }
    if (replicaLink != null) {
      replicaLink.close();
      replicaLink = null;
    }
    if (scraper != null) {
      scraper.close();
      scraper = null;
    }
    if (fleetListener != null) {
      registry.removeListener(fleetListener);
      fleetListener = null;
    }
    if (indexListener != null) {
      registry.removeListener(indexListener);
      indexListener = null;
    }
    if (events != null) {
      events.close();
      events = null;
    }
  }

  @Override
  public void close() {
    closing = true;
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
    if (models != null) {
      models.close();
    }
    modelLoader.shutdownNow();
    background.shutdownNow();
    scheduler.shutdownNow();
    if (gcMetrics != null) {
      gcMetrics.close(); // its GC listeners would outlive a runtime closed in a longer-lived JVM (tests, the demo)
    }
  }
}
