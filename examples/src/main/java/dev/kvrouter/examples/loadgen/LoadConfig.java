package dev.kvrouter.examples.loadgen;

import java.net.URI;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;

/**
 * How the HTTP driver ({@link LoadGenerator}) sends a workload.
 *
 * @param target base URL of the endpoint (Envoy's listener, or one worker), e.g. {@code http://127.0.0.1:10000}
 * @param model the {@code model} field of every request
 * @param maxInFlight cap on requests in flight; an arrival that finds the cap reached is not sent and counts as
 *     {@code overflow} (waiting would turn the open loop into a closed one and hide the overload)
 * @param maxRunTime no request is sent after this much time from the start
 * @param maxRequests send at most this many requests of the workload (0 = all)
 * @param requestTimeout a request still unfinished this long after its send fails as {@code timeout}
 * @param drainTimeout after the last send, how long to wait for requests in flight before aborting them
 * @param sampleInterval how often each worker's queue is sampled from its {@code /metrics}
 * @param clientThreads threads of the HTTP client's executor (responses are parsed there)
 * @param headers extra headers on every request
 */
public record LoadConfig(URI target, String model, int maxInFlight, Duration maxRunTime, int maxRequests,
    Duration requestTimeout, Duration drainTimeout, Duration sampleInterval, int clientThreads,
    Map<String, String> headers) {

  public LoadConfig {
    Objects.requireNonNull(target, "target");
    Objects.requireNonNull(model, "model");
    headers = Map.copyOf(headers);
    if (maxInFlight < 1 || clientThreads < 1 || maxRequests < 0) {
      throw new IllegalArgumentException("maxInFlight and clientThreads must be >= 1, maxRequests >= 0");
    }
    for (Duration d : new Duration[] {maxRunTime, requestTimeout, drainTimeout, sampleInterval}) {
      if (d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException("durations must be positive");
      }
    }
  }

  /** 512 in flight, 10 minutes of sending, 5-minute request timeout, 1-minute drain, 250 ms samples. */
  public static LoadConfig defaults(URI target, String model) {
    return new LoadConfig(target, model, 512, Duration.ofMinutes(10), 0, Duration.ofMinutes(5),
        Duration.ofMinutes(1), Duration.ofMillis(250), 2, Map.of());
  }

  public LoadConfig withMaxInFlight(int n) {
    return new LoadConfig(target, model, n, maxRunTime, maxRequests, requestTimeout, drainTimeout, sampleInterval,
        clientThreads, headers);
  }

  public LoadConfig withMaxRunTime(Duration d) {
    return new LoadConfig(target, model, maxInFlight, d, maxRequests, requestTimeout, drainTimeout, sampleInterval,
        clientThreads, headers);
  }

  public LoadConfig withMaxRequests(int n) {
    return new LoadConfig(target, model, maxInFlight, maxRunTime, n, requestTimeout, drainTimeout, sampleInterval,
        clientThreads, headers);
  }

  public LoadConfig withTimeouts(Duration request, Duration drain) {
    return new LoadConfig(target, model, maxInFlight, maxRunTime, maxRequests, request, drain, sampleInterval,
        clientThreads, headers);
  }

  public LoadConfig withSampleInterval(Duration d) {
    return new LoadConfig(target, model, maxInFlight, maxRunTime, maxRequests, requestTimeout, drainTimeout, d,
        clientThreads, headers);
  }

  public LoadConfig withHeaders(Map<String, String> h) {
    return new LoadConfig(target, model, maxInFlight, maxRunTime, maxRequests, requestTimeout, drainTimeout,
        sampleInterval, clientThreads, h);
  }
}
