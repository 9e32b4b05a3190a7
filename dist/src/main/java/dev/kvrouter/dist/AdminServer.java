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
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.BooleanSupplier;

/**
 * The router's own HTTP endpoints (default 127.0.0.1:9090): {@code /metrics} (Prometheus), {@code /health}
 * (200 when serving, 503 otherwise) and {@code /status} (the fleet as the router sees it, as JSON).
 */
final class AdminServer implements AutoCloseable {

  private static final ObjectMapper JSON = new ObjectMapper();

  private final PrometheusMeterRegistry metrics;
  private final WorkerRegistry registry;
  private final BooleanSupplier healthy;
  private HttpServer server;
  private ExecutorService executor;

  AdminServer(PrometheusMeterRegistry metrics, WorkerRegistry registry, BooleanSupplier healthy) {
    this.metrics = metrics;
    this.registry = registry;
    this.healthy = healthy;
  }

  AdminServer start(String bind, int port) throws IOException {
    server = HttpServer.create(new InetSocketAddress(bind, port), 64);
    executor = Executors.newFixedThreadPool(2, r -> {
      Thread t = new Thread(r, "admin-http");
      t.setDaemon(true);
      return t;
    });
    server.setExecutor(executor);
    server.createContext("/metrics", ex -> send(ex, 200, "text/plain; version=0.0.4; charset=utf-8", metrics.scrape()));
    server.createContext("/health", ex -> {
      boolean ok = healthy.getAsBoolean();
      send(ex, ok ? 200 : 503, "text/plain", ok ? "ok" : "unavailable");
    });
    server.createContext("/status", ex -> send(ex, 200, "application/json", status()));
    server.start();
    return this;
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
    }
  }
}
