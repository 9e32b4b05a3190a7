package dev.kvrouter.xds.registry;

import dev.kvrouter.index.WorkerId;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * One inference engine instance as the fleet knows it. Immutable; a change in {@code workers.yaml} produces a
 * new record and a new {@link WorkerSet} version.
 *
 * @param name unique worker name; its Envoy cluster is {@link #clusterName()}
 * @param address IP address Envoy connects to (ORIGINAL_DST needs a resolved IP, not a host name)
 * @param port HTTP port of the OpenAI-compatible server
 * @param model the base model it serves
 * @param adapters LoRA adapter names it can serve, besides the base model
 * @param role which phase it serves
 * @param events its KV-event publisher, or {@code null} when it publishes none (approximate routing only)
 * @param dpSize number of data-parallel ranks; each rank is a separate cache owner
 * @param blockSize KV block size in tokens, or 0 to take the model's default
 * @param weight relative capacity used by load-based policies (1 = nominal)
 * @param metricsUrl the Prometheus endpoint to scrape engine load from, or {@code null} for the default
 *     {@code http://address:port/metrics} (an IPv6 address in brackets)
 * @param draining true while the worker finishes in-flight work and must receive no new requests
 * @param labels free-form labels for filtering and reports
 */
public record Worker(
    String name,
    String address,
    int port,
    String model,
    List<String> adapters,
    Role role,
    EventEndpoint events,
    int dpSize,
    int blockSize,
    int weight,
    String metricsUrl,
    boolean draining,
    Map<String, String> labels) {

  /** Which phase of inference a worker serves. */
  public enum Role {
    BOTH,
    PREFILL,
    DECODE
  }

  /**
   * A worker's KV-event publisher (vLLM {@code --kv-events-config}).
   *
   * @param endpoint ZMQ endpoint of rank 0's PUB socket, e.g. {@code tcp://10.0.0.5:5557}; rank r uses port + r
   * @param replayEndpoint ZMQ endpoint of the engine's ROUTER replay socket, or {@code null} if replay is off
   * @param topic the topic prefix to subscribe to ("" = all)
   * @param bind true when the router binds and the engine connects (llm-d style), false when the engine binds
   *     (the vLLM default)
   */
  public record EventEndpoint(String endpoint, String replayEndpoint, String topic, boolean bind) {
    public EventEndpoint {
      Objects.requireNonNull(endpoint, "events.endpoint");
      topic = topic == null ? "" : topic;
    }
  }

  public Worker {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(address, "address");
    Objects.requireNonNull(model, "model");
    adapters = adapters == null ? List.of() : List.copyOf(adapters);
    role = role == null ? Role.BOTH : role;
    labels = labels == null ? Map.of() : Map.copyOf(labels);
    if (dpSize <= 0) {
      dpSize = 1;
    }
    if (weight <= 0) {
      weight = 1;
    }
  }

  /** A plain worker serving one model on address:port, with defaults for everything else. */
  public static Worker simple(String name, String address, int port, String model) {
    return new Worker(name, address, port, model, List.of(), Role.BOTH, null, 1, 0, 1, null, false, Map.of());
  }

  /** The Envoy cluster that holds exactly this worker, targeted by {@code x-kvrouter-cluster}. */
  public String clusterName() {
    return clusterName(name);
  }

  public static String clusterName(String workerName) {
    return "kvrouter_worker_" + workerName;
  }

  /**
   * {@code ip:port} ({@code [v6]:port} for an IPv6 address), the value of {@code x-gateway-destination-endpoint}
   * for this worker: Envoy's ORIGINAL_DST reads {@code fd00::5:8000} as no valid address and answers 503.
   */
  public String endpoint() {
    return hostPort(address, port);
  }

  /** {@code host:port}, with an IPv6 literal in brackets as URLs, Envoy and ZMQ expect it. */
  public static String hostPort(String host, int port) {
    return (host.indexOf(':') >= 0 && !host.startsWith("[") ? "[" + host + "]" : host) + ":" + port;
  }

  /** The cache owners of this worker: one per data-parallel rank. */
  public List<WorkerId> cacheOwners() {
    if (dpSize == 1) {
      return List.of(new WorkerId(name, 0));
    }
    WorkerId[] ids = new WorkerId[dpSize];
    for (int r = 0; r < dpSize; r++) {
      ids[r] = new WorkerId(name, r);
    }
    return List.of(ids);
  }

  public boolean serves(String modelOrAdapter) {
    return model.equals(modelOrAdapter) || adapters.contains(modelOrAdapter);
  }

  public String effectiveMetricsUrl() {
    return metricsUrl != null ? metricsUrl : "http://" + hostPort(address, port) + "/metrics";
  }

  public Worker withDraining(boolean d) {
    return new Worker(name, address, port, model, adapters, role, events, dpSize, blockSize, weight, metricsUrl, d,
        labels);
  }
}
