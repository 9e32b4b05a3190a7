package dev.kvrouter.dist;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;

/**
 * The router's own HTTP endpoints (default 127.0.0.1:9090): {@code /metrics} (Prometheus), {@code /health}
 * (200 when serving, 503 otherwise) and {@code /status} (the fleet as the router sees it, as JSON).
 */
final class AdminServer implements AutoCloseable {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int THREADS = 4;
  /**
   * The longest one exchange may take, from reading its request to writing the answer. The JDK server reads a
   * request on the executor's thread with a blocking read and no timeout, so a client that sends part of a request
   * and stops would hold a thread for as long as it keeps the connection; past this it is interrupted, which closes
   * the connection. A scrape of /metrics takes milliseconds.
   */
  static final Duration EXCHANGE_DEADLINE = Duration.ofSeconds(5);

  private final PrometheusMeterRegistry metrics;
  private final WorkerRegistry registry;
  private final BooleanSupplier healthy;
  private HttpServer server;
  private ExecutorService executor;
  private ScheduledExecutorService deadlines;

  AdminServer(PrometheusMeterRegistry metrics, WorkerRegistry registry, BooleanSupplier healthy) {
    this.metrics = metrics;
    this.registry = registry;
    this.healthy = healthy;
  }

  AdminServer start(String bind, int port) throws IOException {
    return start(bind, port, EXCHANGE_DEADLINE);
  }

  AdminServer start(String bind, int port, Duration deadline) throws IOException {
    server = HttpServer.create(new InetSocketAddress(bind, port), 64);
    executor = Executors.newFixedThreadPool(THREADS, daemon("admin-http"));
    deadlines = Executors.newSingleThreadScheduledExecutor(daemon("admin-http-deadline"));
    server.setExecutor(task -> executor.execute(() -> within(deadline, task)));
    server.createContext("/metrics", ex -> send(ex, 200, "text/plain; version=0.0.4; charset=utf-8", metrics.scrape()));
    server.createContext("/health", ex -> {
      boolean ok = healthy.getAsBoolean();
      send(ex, ok ? 200 : 503, "text/plain", ok ? "ok" : "unavailable");
    });
    server.createContext("/status", ex -> send(ex, 200, "application/json", status()));
    server.start();
    return this;
  }

  private static java.util.concurrent.ThreadFactory daemon(String name) {
    return r -> {
      Thread t = new Thread(r, name);
      t.setDaemon(true);
      return t;
    };
  }

  /** Runs {@code task}, interrupting it past {@code deadline}: the JDK server's socket reads and writes end then. */
  private void within(Duration deadline, Runnable task) {
    Thread self = Thread.currentThread();
    AtomicBoolean running = new AtomicBoolean(true);
    ScheduledFuture<?> alarm = deadlines.schedule(() -> {
      synchronized (running) { // never interrupts this pool thread once it runs another task
        if (running.get()) {
          self.interrupt();
        }
      }
    }, deadline.toMillis(), TimeUnit.MILLISECONDS);
    try {
      task.run();
    } finally {
      synchronized (running) {
        running.set(false);
      }
      alarm.cancel(false);
      Thread.interrupted();
    }
  }

  int port() {
    return server.getAddress().getPort();
  }

  private String status() throws IOException {
    ObjectNode root = JSON.createObjectNode();
    var fleet = registry.current();
    root.put("fleet_version", fleet.version());
    ArrayNode ws = root.putArray("workers");
    for (Worker w : fleet.all()) {
      ws.addObject().put("name", w.name()).put("endpoint", w.endpoint()).put("model", w.model())
          .put("cluster", w.clusterName()).put("draining", w.draining()).put("dp_size", w.dpSize());
    }
    return JSON.writerWithDefaultPrettyPrinter().writeValueAsString(root);
  }

  private static void send(HttpExchange ex, int status, String type, String body) throws IOException {
    try (ex) {
      byte[] b = body.getBytes(StandardCharsets.UTF_8);
      ex.getResponseHeaders().set("content-type", type);
      ex.sendResponseHeaders(status, b.length);
      ex.getResponseBody().write(b);
    }
  }

  @Override
  public void close() {
    if (server != null) {
      server.stop(0);
      executor.shutdownNow();
      deadlines.shutdownNow();
    }
  }
}
