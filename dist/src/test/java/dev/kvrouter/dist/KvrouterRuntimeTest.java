package dev.kvrouter.dist;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;

import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.replicas.ReplicaSync;
import dev.kvrouter.extproc.replicas.ZmqReplicaLink;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.events.EventSource;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerSet;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;

class KvrouterRuntimeTest {

  private static Worker withEvents(String name, int dpSize, String endpoint, String replay) {
    return new Worker(name, "10.0.0.1", 8000, "m", List.of(), Worker.Role.BOTH,
        new Worker.EventEndpoint(endpoint, replay, "kv", false), dpSize, 16, 1, null, false, Map.of());
  }

  /**
   * workers.yaml rejects endpoints that cannot be offset per rank, but the registry takes fleets from other sources
   * too. Such a worker used to throw out of the fleet listener, so no worker of that fleet version was reconciled.
   */
  @Test
  void aWorkerWhoseEventsCannotBeFollowedIsLeftOutAndTheRestReconciled() {
    WorkerSet fleet = new WorkerSet(3, List.of(
        withEvents("a", 2, "tcp://10.0.0.1:5557", "tcp://10.0.0.1:5657"),
        withEvents("bad", 2, "ipc:///tmp/kv", null),
        Worker.simple("quiet", "10.0.0.3", 8000, "m"),
        withEvents("c", 1, "tcp://10.0.0.4:5557", null)));
    List<String> skipped = new ArrayList<>();
    List<EventSource> sources = KvrouterRuntime.eventSources(fleet, w -> 16, Set.of("m"),
        (w, e) -> skipped.add(w.name() + ": " + e.getMessage()));
    assertThat(sources).extracting(s -> s.id() + " " + s.endpoint() + " " + s.replayEndpoint()).containsExactly(
        "a tcp://10.0.0.1:5557 tcp://10.0.0.1:5657",
        "a#dp1 tcp://10.0.0.1:5558 tcp://10.0.0.1:5658",
        "c tcp://10.0.0.4:5557 null");
    assertThat(sources).allMatch(EventSource::notPrefixClosed);
    assertThat(skipped).singleElement().asString().startsWith("bad: cannot offset endpoint");
  }

  /**
   * The admin /health is what an orchestrator waits on before it stops the next replica of a rolling restart, and it
   * said 200 as soon as the ext_proc server listened, while the preloaded tokenizer still loaded (Llama 3.1's here)
   * and every request for the model was routed by load alone. It says 200 once the preloaded models' first loads have
   * ended.
   */
  @Test
  void adminHealthWaitsForThePreloadedModels(@TempDir Path dir) throws Exception {
    oneWorker(dir);
    int admin = freePort();
    Path tokenizer = Path.of(System.getProperty("kvrouter.root", "..")).resolve(".cache/tokenizers/llama3_1")
        .toAbsolutePath().normalize();
    assertThat(tokenizer.resolve("tokenizer.json")).as("run scripts/fetch-tokenizers.sh").isRegularFile();
    KvrouterConfig cfg = KvrouterConfig.parse("server: {ext_proc_port: " + freePort() + ", xds_port: " + freePort()
        + ", admin_port: " + admin + "}\nrouting: {scrape: {enabled: false}}\nmodels: [{name: m, tokenizer: '"
        + tokenizer + "'}]\n", "t");
    KvrouterRuntime rt = KvrouterRuntime.start(cfg, dir, KvrouterRuntime.Mode.ALL);
    try {
      HttpClient http = HttpClient.newHttpClient();
      HttpRequest health = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + admin + "/health")).build();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      int status;
      do {
        status = http.send(health, HttpResponse.BodyHandlers.ofString()).statusCode();
      } while (status != 200 && System.nanoTime() < deadline);
      assertThat(status).isEqualTo(200);
      assertThat(rt.models().await("m", Duration.ZERO).fallback()).as("the model when /health first said 200")
          .isNull();
    } finally {
      rt.close();
    }
  }

  /** A workers.yaml of one worker, {@code a}, in {@code dir}. */
  private static void oneWorker(Path dir) throws java.io.IOException {
    Files.writeString(dir.resolve("workers.yaml"),
        "workers:\n  - {name: a, address: 127.0.0.1, port: 1, model: m}\n");
  }

  static int freePort() throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  /**
   * A load balancer or orchestrator probing the admin /health must see a draining replica as going away, as Envoy
   * sees it through the ext_proc gRPC health, not only once its ports close.
   */
  @Test
  void adminHealthIs503OnceTheRouterDrains(@TempDir Path dir) throws Exception {
    oneWorker(dir);
    int ext = freePort();
    int admin = freePort();
    KvrouterConfig cfg = KvrouterConfig.parse("server: {ext_proc_port: " + ext + ", xds_port: " + freePort()
        + ", admin_port: " + admin + ", drain_ms: 3000}\nrouting: {scrape: {enabled: false}}\n", "t");
    KvrouterRuntime rt = KvrouterRuntime.start(cfg, dir, KvrouterRuntime.Mode.ALL);
    HttpClient http = HttpClient.newHttpClient();
    ManagedChannel ch = ManagedChannelBuilder.forAddress("127.0.0.1", ext).usePlaintext().build();
    HttpRequest health = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + admin + "/health")).build();
    Thread drainer = new Thread(() -> {
      try {
        rt.drain(Duration.ofMillis(3000));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    try {
      assertThat(http.send(health, HttpResponse.BodyHandlers.ofString()).statusCode()).isEqualTo(200);
      drainer.start();
      long deadline = System.nanoTime() + 2_000_000_000L;
      ServingStatus grpc;
      do {
        grpc = HealthGrpc.newBlockingStub(ch).check(HealthCheckRequest.newBuilder()
            .setService("envoy.service.ext_proc.v3.ExternalProcessor").build()).getStatus();
      } while (grpc != ServingStatus.NOT_SERVING && System.nanoTime() < deadline);
      assertThat(grpc).isEqualTo(ServingStatus.NOT_SERVING);
      assertThat(http.send(health, HttpResponse.BodyHandlers.ofString()).statusCode())
          .as("admin /health while draining").isEqualTo(503);
    } finally {
      drainer.join();
      ch.shutdownNow();
      rt.close();
    }
  }

  /**
   * Everything that holds memory is bounded and measured (docs/operations.md, "Memory"): each bounded structure of
   * the router process has a series on /metrics, there from the start (a gauge that appears only under load cannot
   * be alerted on).
   */
  @Test
  void everyBoundedStructureHasItsSeriesOnMetrics(@TempDir Path dir) throws Exception {
    oneWorker(dir);
    int admin = freePort();
    KvrouterConfig cfg = KvrouterConfig.parse("server: {ext_proc_port: " + freePort() + ", xds_port: " + freePort()
        + ", admin_port: " + admin + "}\nreplicas: {bind: tcp://127.0.0.1:"
        + freePort() + "}\n", "t");
    KvrouterRuntime rt = KvrouterRuntime.start(cfg, dir, KvrouterRuntime.Mode.ALL);
    try {
      String metrics = HttpClient.newHttpClient().send(
          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + admin + "/metrics")).build(),
          HttpResponse.BodyHandlers.ofString()).body();
      List<String> series = metrics.lines().filter(l -> !l.startsWith("#")).map(l -> l.split("[{ ]")[0]).toList();
      assertThat(series).contains(
          "kvrouter_index_memory_bytes", // the table, per-worker maps, prediction rings
          "kvrouter_index_media_memory_bytes", // the media identifier caches
          "kvrouter_index_predicted_entries",
          "kvrouter_ledger_reservations",
          "kvrouter_ledger_block_refs", // per-worker block references of the reservations
          "kvrouter_requests_followed", // DecisionTracker
          "kvrouter_observer_pending", // InFlight: decisions awaiting their response observer
          "kvrouter_observer_orphans", // InFlight: closed routing streams whose decision awaits its observer
          "kvrouter_prompt_completions_queued_bytes", // early-stopped prompts awaiting the background thread
          "kvrouter_replicas_queued", // ZmqReplicaLink's send queue
          "kvrouter_replicas_queued_bytes",
          "kvrouter_replicas_peers",
          "kvrouter_replicas_gaps_total", // not structures, but alerted on: lost messages on the replica link
          "kvrouter_replicas_missed_total",
          "kvrouter_replicas_resyncs_total",
          "kvrouter_replicas_stale_released_total",
          "kvrouter_scrape_bytes_total", // what the scrapes of the workers' metrics read
          "kvrouter_scrape_whole_page_workers", // workers that did not answer the filtered scrape
          "kvrouter_events_unroutable_total", // shared bound event sockets: messages no source claims
          "kvrouter_events_oversize_shared_total");
    } finally {
      rt.close();
    }
  }

  /**
   * {@code replicas:} in the {@code xds} mode: the process joins the replica link as a member that only shares its
   * Envoys' view (docs/routing.md, "A new worker joins once Envoy has it"); a router hears it, and it hears the
   * router's load without a ledger to keep it in.
   */
  @Test
  void anXdsProcessWithReplicasJoinsTheLinkWithoutALedger(@TempDir Path dir) throws Exception {
    oneWorker(dir);
    int xdsLink = freePort();
    int routerLink = freePort();
    KvrouterConfig cfg = KvrouterConfig.parse("server: {xds_port: " + freePort() + ", admin_port: " + freePort()
        + "}\nreplicas: {bind: 'tcp://127.0.0.1:" + xdsLink + "', peers: ['tcp://127.0.0.1:" + routerLink + "']}\n",
        "t");
    LoadLedger ledger = new LoadLedger(System::nanoTime, TimeUnit.MINUTES.toNanos(1), 100);
    try (KvrouterRuntime rt = KvrouterRuntime.start(cfg, dir, KvrouterRuntime.Mode.XDS);
        ZmqReplicaLink link = new ZmqReplicaLink("tcp://127.0.0.1:" + routerLink,
            List.of("tcp://127.0.0.1:" + xdsLink), 1024)) {
      ReplicaSync router = new ReplicaSync(7, ledger, PrefixOverlapSource.NONE, link, System::nanoTime,
          TimeUnit.SECONDS.toNanos(3));
      link.start(router);
      ledger.setListener(router.ledgerListener());
      ledger.reserve(new WorkerId("a", 0), 100, new long[] {1, 2}, 1);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (router.peerCount() == 0 || !rt.metricsText().contains("kvrouter_replicas_peers 1.0")) {
        assertThat(System.nanoTime()).as("the router and the xds process hear each other").isLessThan(deadline);
        Thread.sleep(10);
      }
      assertThat(rt.ledger()).isNull();
      assertThat(rt.extProc()).isNull();
      assertThat(rt.metricsText()).doesNotContain("kvrouter_ledger_reservations");
    }
  }

  /**
   * The README's start ({@code cp kvrouter.example.yaml kvrouter.yaml}, then workers.yaml) leaves {@code models: []},
   * so every request of the fleet's model is routed by load alone. The start says so once per name the workers serve
   * that no model or adapter entry lists, and is quiet for what is listed.
   */
  @Test
  void aServedModelMissingFromModelsIsToldOnce(@TempDir Path dir) throws Exception {
    Files.writeString(dir.resolve("workers.yaml"), "workers:\n"
        + "  - {name: a, address: 127.0.0.1, port: 1, model: m, adapters: [sql-lora]}\n"
        + "  - {name: b, address: 127.0.0.1, port: 2, model: other}\n");
    Logger logger = (Logger) LoggerFactory.getLogger(ModelRegistry.class);
    ListAppender<ILoggingEvent> logs = new ListAppender<>();
    logs.start();
    logger.addAppender(logs);
    try {
      KvrouterConfig cfg = KvrouterConfig.parse("server: {ext_proc_port: " + freePort() + ", xds_port: "
          + freePort() + ", admin_port: " + freePort() + "}\nrouting: {scrape: {enabled: false}}\n"
          + "models: [{name: m}]\n", "t");
      try (KvrouterRuntime rt = KvrouterRuntime.start(cfg, dir, KvrouterRuntime.Mode.ALL)) {
        rt.models().fleetServes(List.of("m", "other", "sql-lora")); // a later fleet version: nothing new to tell
        assertThat(logs.list).filteredOn(e -> e.getLevel() == Level.WARN)
            .extracting(ILoggingEvent::getFormattedMessage)
            .satisfiesExactly(
                m -> assertThat(m).startsWith("workers serve other but").contains("routed by load alone"),
                m -> assertThat(m).startsWith("workers serve sql-lora but").contains("add it with its tokenizer"));
      }
    } finally {
      logger.detachAppender(logs);
    }
  }

  /**
   * {@code replicas.curve}: a process whose link holds the key pair is heard by a router holding it, and the keys
   * are never logged; a key file that is not one stops the start, naming the setting and the file but not what it
   * holds; a non-loopback bind without CURVE is warned about.
   */
  @Test
  void theReplicaLinksCurveKeysAreCheckedAtStartAndNeverLogged(@TempDir Path dir) throws Exception {
    oneWorker(dir);
    org.zeromq.ZMQ.Curve.KeyPair pair = org.zeromq.ZMQ.Curve.generateKeyPair();
    Files.writeString(dir.resolve("replicas.key"), "== CURVE PUBLIC KEY ==\n" + pair.publicKey
        + "\n== CURVE SECRET KEY ==\n" + pair.secretKey + "\n");
    Files.writeString(dir.resolve("replicas.key.pub"), pair.publicKey + "\n");
    Files.writeString(dir.resolve("other.pub"), org.zeromq.ZMQ.Curve.generateKeyPair().publicKey + "\n");
    Logger root = (Logger) LoggerFactory.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
    ListAppender<ILoggingEvent> logs = new ListAppender<>();
    logs.start();
    root.addAppender(logs);
    try {
      int xdsLink = freePort();
      int routerLink = freePort();
      KvrouterConfig cfg = KvrouterConfig.parse("server: {xds_port: " + freePort() + ", admin_port: " + freePort()
          + "}\nreplicas: {bind: 'tcp://127.0.0.1:" + xdsLink + "', peers: ['tcp://127.0.0.1:" + routerLink + "'], "
          + "curve: {secret_key_file: replicas.key, public_key_file: replicas.key.pub}}\n", "t");
      LoadLedger ledger = new LoadLedger(System::nanoTime, TimeUnit.MINUTES.toNanos(1), 100);
      try (KvrouterRuntime rt = KvrouterRuntime.start(cfg, dir, KvrouterRuntime.Mode.XDS);
          ZmqReplicaLink link = new ZmqReplicaLink("tcp://127.0.0.1:" + routerLink,
              List.of("tcp://127.0.0.1:" + xdsLink), 1024, java.time.Duration.ofSeconds(5),
              dev.kvrouter.extproc.replicas.CurveKeys.load(dir.resolve("replicas.key"), null))) {
        ReplicaSync router = new ReplicaSync(7, ledger, PrefixOverlapSource.NONE, link, System::nanoTime,
            TimeUnit.SECONDS.toNanos(3));
        link.start(router);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (router.peerCount() == 0 || !rt.metricsText().contains("kvrouter_replicas_peers 1.0")) {
          assertThat(System.nanoTime()).as("the router and the xds process hear each other").isLessThan(deadline);
          Thread.sleep(10);
        }
        assertThat(rt.metricsText()).contains("kvrouter_replicas_refused_total 0.0");
      }
      for (String bad : List.of("curve: {secret_key_file: replicas.key.pub.missing}",
          "curve: {secret_key_file: replicas.key, public_key_file: other.pub}",
          "curve: {secret_key_file: workers.yaml}")) {
        KvrouterConfig c = KvrouterConfig.parse("server: {xds_port: " + freePort() + ", admin_port: " + freePort()
            + "}\nreplicas: {bind: 'tcp://127.0.0.1:" + freePort() + "', " + bad + "}\n", "t");
        Throwable t = org.assertj.core.api.Assertions.catchThrowable(
            () -> KvrouterRuntime.start(c, dir, KvrouterRuntime.Mode.XDS).close());
        assertThat(t).as(bad).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("replicas.curve.");
        assertThat(t.getMessage()).doesNotContain(pair.secretKey).doesNotContain(pair.publicKey);
      }
      logs.list.clear();
      KvrouterConfig open = KvrouterConfig.parse("server: {xds_port: " + freePort() + ", admin_port: " + freePort()
          + "}\nreplicas: {bind: 'tcp://0.0.0.0:" + freePort() + "'}\n", "t");
      try (KvrouterRuntime rt = KvrouterRuntime.start(open, dir, KvrouterRuntime.Mode.XDS)) {
        assertThat(logs.list).filteredOn(e -> e.getLevel() == Level.WARN)
            .extracting(ILoggingEvent::getFormattedMessage)
            .anySatisfy(m -> assertThat(m).contains("replicas.curve is not set"));
      }
    } finally {
      root.detachAppender(logs);
    }
    assertThat(logs.list).extracting(ILoggingEvent::getFormattedMessage)
        .noneSatisfy(m -> assertThat(m).contains(pair.secretKey))
        .noneSatisfy(m -> assertThat(m).contains(pair.publicKey));
    assertThat(KvrouterRuntime.loopback("tcp://127.0.0.1:5601")).isTrue();
    assertThat(KvrouterRuntime.loopback("tcp://localhost:5601")).isTrue();
    assertThat(KvrouterRuntime.loopback("tcp://0.0.0.0:5601")).isFalse();
    assertThat(KvrouterRuntime.loopback("tcp://10.1.2.3:5601")).isFalse();
    assertThat(KvrouterRuntime.loopback("tcp://router-b:5601")).isFalse();
  }

  /**
   * The split deployment without {@code replicas:}: the routers, in {@code ext-proc} mode, hear nothing of what the
   * Envoys on the {@code xds} process hold and route to a new worker the moment they read workers.yaml, a 503 until
   * Envoy has it. Each start says so, since nothing else would.
   */
  @Test
  void theSplitModesWithoutReplicasSayTheRoutersCannotGateOnTheEnvoys(@TempDir Path dir) throws Exception {
    oneWorker(dir);
    Logger logger = (Logger) LoggerFactory.getLogger(KvrouterRuntime.class);
    ListAppender<ILoggingEvent> logs = new ListAppender<>();
    logs.start();
    logger.addAppender(logs);
    try {
      for (KvrouterRuntime.Mode mode : List.of(KvrouterRuntime.Mode.XDS, KvrouterRuntime.Mode.EXT_PROC)) {
        logs.list.clear();
        KvrouterConfig cfg = KvrouterConfig.parse("server: {ext_proc_port: " + freePort() + ", xds_port: "
            + freePort() + ", admin_port: " + freePort() + "}\nrouting: {scrape: {enabled: false}}\n", "t");
        try (KvrouterRuntime rt = KvrouterRuntime.start(cfg, dir, mode)) {
          assertThat(logs.list).as(mode.toString()).filteredOn(e -> e.getLevel() == Level.WARN)
              .extracting(ILoggingEvent::getFormattedMessage)
              .anySatisfy(m -> assertThat(m).contains("replicas.bind").contains("workers.yaml"));
        }
      }
    } finally {
      logger.detachAppender(logs);
    }
  }

  /** Runs {@code kvrouter -c config} and returns its status, keeping what it printed on stderr. */
  private static int runCli(Path config, StringBuilder stderr) {
    return runCli(stderr, "-c", config.toString());
  }

  private static int runCli(StringBuilder stderr, String... args) {
    PrintStream old = System.err;
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    try {
      return new CommandLine(new Kvrouter()).execute(args);
    } finally {
      System.setErr(old);
      stderr.append(err.toString(StandardCharsets.UTF_8));
    }
  }

  /**
   * docs/configuration.md: missing or unreadable files stop the start with status 2. A port in use and a missing
   * workers.yaml used to escape as a stack trace and status 1; each must be one line naming what failed.
   */
  @Test
  void aStartThatCannotBindOrReadItsFilesSaysWhatAndExitsWithStatus2(@TempDir Path dir) throws Exception {
    String ports = "server: {ext_proc_port: " + freePort() + ", xds_port: " + freePort() + ", admin_port: %d}\n";
    Files.writeString(dir.resolve("workers.yaml"), "workers: []\n");
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      Path portTaken = dir.resolve("a.yaml");
      Files.writeString(portTaken, String.format(ports, taken.getLocalPort()));
      StringBuilder err = new StringBuilder();
      assertThat(runCli(portTaken, err)).isEqualTo(2);
      assertThat(err.toString()).startsWith("kvrouter: cannot start: server.admin_port (127.0.0.1:"
          + taken.getLocalPort() + "): java.net.BindException: ").doesNotContain("\tat ");
    }
    Path noWorkers = dir.resolve("b.yaml");
    Files.writeString(noWorkers, String.format(ports, freePort()) + "workers: {file: nope.yaml}\n");
    StringBuilder err = new StringBuilder();
    assertThat(runCli(noWorkers, err)).isEqualTo(2);
    assertThat(err.toString()).startsWith("kvrouter: cannot start: workers.file (" + dir.resolve("nope.yaml")
        + "): java.nio.file.NoSuchFileException: ").doesNotContain("\tat ");
    Path noTokenizer = dir.resolve("c.yaml");
    Files.writeString(noTokenizer, String.format(ports, freePort())
        + "models: [{name: m, tokenizer: /nonexistent/tok}]\n");
    assertThat(runCli(noTokenizer, new StringBuilder())).isEqualTo(2);
  }

  /** scripts/demo.sh says "try --help"; every mode, the demo included, answers it instead of "Unknown option". */
  @Test
  void everyModeAnswersHelp() {
    CommandLine cli = new CommandLine(new Kvrouter());
    assertThat(cli.getSubcommands()).containsKeys("all", "ext-proc", "xds", "demo");
    for (String mode : cli.getSubcommands().keySet()) {
      java.io.StringWriter help = new java.io.StringWriter();
      CommandLine fresh = new CommandLine(new Kvrouter());
      fresh.setOut(new java.io.PrintWriter(help));
      assertThat(fresh.execute(mode, "--help")).as(mode + " --help").isZero();
      assertThat(help.toString()).as(mode + " --help").contains("Usage: kvrouter " + mode);
    }
  }

  /**
   * The README starts the split modes as {@code kvrouter ext-proc --config kvrouter.yaml}. The option used to be
   * the top command's only, so that line failed with "Unknown options" before reading any file.
   */
  @Test
  void eachModeTakesTheConfigAfterItsName(@TempDir Path dir) throws Exception {
    Files.writeString(dir.resolve("workers.yaml"), "workers: []\n");
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      Path config = dir.resolve("kvrouter.yaml");
      Files.writeString(config, "server: {ext_proc_port: " + freePort() + ", xds_port: " + freePort()
          + ", admin_port: " + taken.getLocalPort() + "}\n");
      for (String mode : List.of("all", "ext-proc", "xds")) {
        assertThat(new CommandLine(new Kvrouter()).execute(mode, "--help")).as(mode + " --help").isZero();
        for (String flag : List.of("--config", "-c")) {
          StringBuilder err = new StringBuilder();
          assertThat(runCli(err, mode, flag, config.toString())).as(mode + " " + flag).isEqualTo(2);
          assertThat(err.toString()).as(mode + " " + flag)
              .startsWith("kvrouter: cannot start: server.admin_port (127.0.0.1:" + taken.getLocalPort() + ")");
        }
      }
    }
  }
}
