package dev.kvrouter.examples.loadgen;

import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkersFile;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * A worker the driver watches (never sends inference to): its name as it appears in
 * {@code x-kvrouter-served-by}, its base URL (admin calls such as {@code /reset_prefix_cache}) and its
 * Prometheus endpoint.
 */
public record WorkerTarget(String name, URI baseUri, URI metricsUri) {

  public WorkerTarget {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(baseUri, "baseUri");
    Objects.requireNonNull(metricsUri, "metricsUri");
  }

  /** A worker at {@code http://host:port} with metrics at {@code /metrics}. */
  public static WorkerTarget of(String name, URI baseUri) {
    String b = baseUri.toString().replaceAll("/+$", "");
    return new WorkerTarget(name, URI.create(b), URI.create(b + "/metrics"));
  }

  /** Parses {@code name=http://host:port}. */
  public static WorkerTarget parse(String s) {
    int eq = s.indexOf('=');
    if (eq <= 0) {
      throw new IllegalArgumentException("worker must be name=http://host:port, was " + s);
    }
    return of(s.substring(0, eq).trim(), URI.create(s.substring(eq + 1).trim()));
  }

  /** The workers of the router's {@code workers.yaml}, metrics URL as the router would scrape it. */
  public static List<WorkerTarget> fromWorkersFile(Path file) throws IOException {
    List<WorkerTarget> out = new ArrayList<>();
    for (Worker w : WorkersFile.read(file)) {
      URI base = URI.create("http://" + hostPort(w.address(), w.port()));
      out.add(new WorkerTarget(w.name(), base, URI.create(w.effectiveMetricsUrl())));
    }
    return out;
  }

  private static String hostPort(String address, int port) {
    return (address.contains(":") ? "[" + address + "]" : address) + ":" + port;
  }
}
