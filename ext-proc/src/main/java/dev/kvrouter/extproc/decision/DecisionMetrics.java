package dev.kvrouter.extproc.decision;

import dev.kvrouter.extproc.routing.Candidate;
import dev.kvrouter.extproc.routing.Decision;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import dev.kvrouter.xds.registry.Worker;
import java.time.Duration;
import java.util.Collection;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The decision records as metrics (Prometheus names after Micrometer's conversion):
 *
 * <ul>
 *   <li>{@code kvrouter_routing_decisions_total{policy,reason,fallback}}: every decision ({@code fallback="none"}
 *       when the policy ran as configured);
 *   <li>{@code kvrouter_routing_fallbacks_total{fallback}}: each fallback token, so a silent drop to load
 *       balancing shows as a rising series;
 *   <li>{@code kvrouter_routing_ineligible_total{why_not}}: candidates excluded, by reason;
 *   <li>{@code kvrouter_routing_decision_seconds}: time to decide (histogram);
 *   <li>{@code kvrouter_requests_refused_total{reason}}: requests the router answered itself before any decision
 *       (a malformed or oversized body, a tenant's POST to a path it does not route, its own failure);
 *   <li>{@code kvrouter_routing_abandoned_total}: requests Envoy gave up on (its message_timeout, a client gone)
 *       while they waited for a routing thread, left unrouted: the routing threads are behind;
 *   <li>{@code kvrouter_ext_proc_unexpected_messages_total{message}}: request headers or bodies a stream got after it
 *       had them, ignored (Envoy sends neither: another ext_proc client, or an Envoy bug);
 *   <li>{@code kvrouter_routing_chosen_overlap_blocks{policy}}: effective overlap of the chosen worker;
 *   <li>{@code kvrouter_routing_eviction_share{model}}: the share of recent prompt blocks the model's fleet had
 *       computed and evicted everywhere, as the last decision with block hashes saw it ({@code EvictionPressure});
 *   <li>{@code kvrouter_request_ttft_seconds{policy}} (streaming requests) and
 *       {@code kvrouter_request_duration_seconds{policy}}, measured from the decision;
 *   <li>{@code kvrouter_truth_checks_total{worker,outcome}}, {@code kvrouter_truth_error_blocks{worker}},
 *       {@code kvrouter_truth_predicted_cached_tokens_total{worker}},
 *       {@code kvrouter_truth_actual_cached_tokens_total{worker}}: predicted versus actual cached tokens.
 * </ul>
 *
 * <p>Label values come from closed vocabularies (policy names, reason and fallback tokens) or the fleet
 * (worker names, the models of routed requests), never from request content. Thread-safe.
 *
 * <p>Meters are kept by their label values once registered: a lookup by name builds and hashes a Micrometer id
 * (its tags sorted) each time, eight per request (2 KB of garbage), on the routing threads and the gRPC event
 * loops. The per-worker ones are dropped with the registry's in {@link #retain}.
 */
public final class DecisionMetrics {

  private final MeterRegistry registry;
  private final Timer decisionTime;
  private static final String EVICTION_SHARE = "kvrouter.routing.eviction.share";

  /**
   * Worker names as last {@link #retain}ed, null before the first: a request sent to a worker just before it left
   * ends after the change, and its outcome would register the departed worker's meters again.
   */
  private volatile Set<String> fleet;

  /** Bits of the last eviction share per model or adapter name the fleet serves ({@link #retain}). */
  private final ConcurrentHashMap<String, AtomicLong> evictionShares = new ConcurrentHashMap<>();

  private record DecisionKey(String policy, String reason, String fallback) {}

  private final ConcurrentHashMap<DecisionKey, Counter> decisions = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, Counter> fallbacks = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, Counter> ineligible = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, PolicyMeters> policies = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, WorkerMeters> workers = new ConcurrentHashMap<>();

  /** The meters labelled by policy alone. */
  private record PolicyMeters(DistributionSummary overlap, Timer ttft, Timer duration) {
    static PolicyMeters register(MeterRegistry registry, String policy) {
      return new PolicyMeters(
          DistributionSummary.builder("kvrouter.routing.chosen.overlap.blocks")
              .description("Effective cached-prefix overlap of the chosen worker, in blocks")
              .tag("policy", policy)
              .register(registry),
          Timer.builder("kvrouter.request.ttft").tag("policy", policy).publishPercentileHistogram().register(registry),
          Timer.builder("kvrouter.request.duration").tag("policy", policy).publishPercentileHistogram()
              .register(registry));
    }
  }

  /**
   * A worker's truth meters ({@link #PER_WORKER}): checks by outcome (a closed vocabulary), and the readings' meters,
   * registered with the first check that had a reading.
   */
  private static final class WorkerMeters {
    final ConcurrentHashMap<String, Counter> checks = new ConcurrentHashMap<>();
    private volatile Readings readings;

    record Readings(DistributionSummary errorBlocks, Counter predicted, Counter actual) {}

    Readings readings(MeterRegistry registry, String worker) {
      Readings r = readings;
      if (r == null) {
        synchronized (this) {
          r = readings;
          if (r == null) {
            r = new Readings(
                DistributionSummary.builder("kvrouter.truth.error.blocks")
                    .description("|predicted - actual| cached tokens, in blocks")
                    .tag("worker", worker)
                    .register(registry),
                Counter.builder("kvrouter.truth.predicted.cached.tokens").tag("worker", worker).register(registry),
                Counter.builder("kvrouter.truth.actual.cached.tokens").tag("worker", worker).register(registry));
            readings = r;
          }
        }
      }
      return r;
    }
  }

  public DecisionMetrics(MeterRegistry registry) {
    this.registry = registry;
    this.decisionTime = Timer.builder("kvrouter.routing.decision")
        .description("Time the router spent deciding one request")
        .publishPercentileHistogram()
        .minimumExpectedValue(Duration.ofNanos(1_000))
        .maximumExpectedValue(Duration.ofMillis(100))
        .register(registry);
  }

  public void decision(Decision d) {
    String fallback = d.fallback() == null ? "none" : d.fallback();
    decisions.computeIfAbsent(new DecisionKey(d.policy(), d.reason(), fallback),
        k -> registry.counter("kvrouter.routing.decisions", "policy", k.policy(), "reason", k.reason(), "fallback",
            k.fallback())).increment();
    if (d.fallback() != null) {
      for (String f : d.fallback().split(",")) {
        fallbacks.computeIfAbsent(f, t -> registry.counter("kvrouter.routing.fallbacks", "fallback", t)).increment();
      }
    }
    for (Candidate c : d.detail().candidates()) {
      if (c.whyNot() != null) {
        ineligible.computeIfAbsent(c.whyNot(), w -> registry.counter("kvrouter.routing.ineligible", "why_not", w))
            .increment();
      }
    }
    decisionTime.record(d.decisionNanos(), TimeUnit.NANOSECONDS);
    if (d.routed() && d.detail().chosen() != null) {
      policy(d.policy()).overlap()
          .record(Math.min(d.detail().chosen().overlap().effective(), d.detail().shape().fullBlocks()));
      if (d.detail().shape().fullBlocks() > 0) {
        evictionShares.computeIfAbsent(d.model(), m -> {
          AtomicLong bits = new AtomicLong();
          Gauge.builder(EVICTION_SHARE, bits, b -> Double.longBitsToDouble(b.get()))
              .description("Share of recent prompt blocks the fleet had computed and evicted everywhere")
              .tag("model", m)
              .register(registry);
          return bits;
        }).set(Double.doubleToRawLongBits(d.detail().evictionShare()));
      }
    }
  }

  /**
   * Removes the per-worker meters of workers no longer in {@code fleet}, and the eviction share of model and adapter
   * names none of them serves; call on every fleet change. Without it every worker that ever served a request kept
   * four meters, and every name ever routed to (LoRA adapters loaded and unloaded) its gauge, without bound. A
   * request that ends on a departed worker after this is not measured per worker.
   */
  public void retain(Collection<Worker> fleet) {
    Set<String> names = new HashSet<>();
    Set<String> served = new HashSet<>();
    for (Worker w : fleet) {
      names.add(w.name());
      served.add(w.model());
      served.addAll(w.adapters());
    }
    this.fleet = Set.copyOf(names);
    for (String model : evictionShares.keySet()) {
      if (!served.contains(model)) {
        // under the entry's lock, which decision() registers the gauge under: never a map entry without its gauge
        evictionShares.computeIfPresent(model, (m, bits) -> {
          registry.find(EVICTION_SHARE).tag("model", m).meters().forEach(registry::remove);
          return null;
        });
      }
    }
    for (String meter : PER_WORKER) {
      for (io.micrometer.core.instrument.Meter m : registry.find(meter).meters()) {
        String worker = m.getId().getTag("worker");
        if (worker != null && !names.contains(worker)) {
          registry.remove(m);
        }
      }
    }
    // a worker that comes back registers its meters anew
    workers.keySet().removeIf(w -> !names.contains(w));
  }

  private PolicyMeters policy(String policy) {
    return policies.computeIfAbsent(policy, p -> PolicyMeters.register(registry, p));
  }

  private boolean inFleet(String worker) {
    Set<String> f = fleet;
    return f == null || f.contains(worker);
  }

  private static final String[] PER_WORKER = {"kvrouter.truth.checks", "kvrouter.truth.error.blocks",
      "kvrouter.truth.predicted.cached.tokens", "kvrouter.truth.actual.cached.tokens"};

  /** A request the router answered itself before deciding ({@code RequestListener#onRefused}). */
  public void refused(String reason) {
    registry.counter("kvrouter.requests.refused", "reason", reason).increment();
  }

  /** A request Envoy gave up on while it waited for a routing thread ({@code RequestListener#onAbandoned}). */
  public void abandoned() {
    registry.counter("kvrouter.routing.abandoned").increment();
  }

  /** An ext_proc message out of the protocol's order, ignored ({@code RequestListener#onUnexpectedMessage}). */
  public void unexpectedMessage(String message) {
    registry.counter("kvrouter.ext_proc.unexpected.messages", "message", message).increment();
  }

  public void outcome(Decision d, TruthCheck truth, long ttftNanos, long durationNanos) {
    truth(d.chosen().name(), truth);
    if (ttftNanos >= 0) {
      policy(d.policy()).ttft().record(ttftNanos, TimeUnit.NANOSECONDS);
    }
    if (durationNanos >= 0) {
      policy(d.policy()).duration().record(durationNanos, TimeUnit.NANOSECONDS);
    }
  }

  /** The per-worker truth meters, for a worker of the fleet only. */
  private void truth(String worker, TruthCheck truth) {
    if (!inFleet(worker)) {
      return;
    }
    WorkerMeters m = workers.computeIfAbsent(worker, w -> new WorkerMeters());
    m.checks.computeIfAbsent(truth.outcome(),
        o -> registry.counter("kvrouter.truth.checks", "worker", worker, "outcome", o)).increment();
    if (truth.actual() >= 0) {
      WorkerMeters.Readings r = m.readings(registry, worker);
      r.errorBlocks().record(truth.errorBlocks());
      r.predicted().increment(truth.predicted());
      r.actual().increment(truth.actual());
    }
    if (!inFleet(worker)) {
      // registered just after a retain that removed the worker's meters: the fleet is published before the removal
      workers.remove(worker, m);
      for (String meter : PER_WORKER) {
        registry.find(meter).tag("worker", worker).meters().forEach(registry::remove);
      }
    }
  }
}
