package dev.kvrouter.extproc.routing;

import dev.kvrouter.extproc.load.LoadTracker;
import dev.kvrouter.extproc.load.Reservation;
import dev.kvrouter.extproc.load.WorkerHealth;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.OpenAiError;
import dev.kvrouter.extproc.request.ResponseIds;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import dev.kvrouter.xds.server.ClusterSnapshots;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;
import java.util.function.Predicate;
import java.util.function.Supplier;
import java.util.random.RandomGenerator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Routes one request: resolves its settings, lists the cache owners serving its model, decides which may take
 * it, lets the policy pick among those, and reserves the request's load on the chosen one.
 *
 * <p>Order of a decision:
 *
 * <ol>
 *   <li>settings: the model's {@link ModelRouting} (or the defaults), then the trusted per-request
 *       {@code x-kvrouter-policy} and {@code x-kvrouter-weights} overrides; a bad override is ignored and shows
 *       as a fallback;
 *   <li>candidates: every (worker, data-parallel rank) serving the model or adapter; none at all is a 404;
 *   <li>eligibility, the same for every policy: not draining and the right role (none left: 503), in every
 *       Envoy (its cluster acknowledged; none left: route among them anyway, fallback {@code not_in_envoy}), healthy (none
 *       left: route among them anyway, fallback {@code all_unhealthy}: a router that declares the whole pool dead
 *       makes an outage out of a metrics problem), below the busy thresholds (none left: 429 with Retry-After,
 *       or the least-loaded with fallback {@code all_busy}, as configured);
 *   <li>the fleet's eviction pressure ({@link EvictionPressure}, per model): how much of what it is asked it had
 *       computed and evicted, which sets how much a recomputed block costs;
 *   <li>scoring ({@link CostModel}) of the eligible, then the policy's choice;
 *   <li>the reservation in the load ledger and a predicted entry in the index, so the next request sees both.
 * </ol>
 *
 * <p>Thread-safe: reads immutable fleet snapshots and concurrent load views; all per-request state lives in the
 * candidates it creates. Decisions are serialized from the index lookup to the reservation and prediction (a few
 * microseconds, after the request was parsed and hashed): requests decided at the same moment on two threads would
 * otherwise not see each other, and best-of-N siblings, which arrive together, scattered through real Envoy (40% of
 * groups split, BENCHMARKS.md).
 */
public final class Router {

  private static final Logger log = LoggerFactory.getLogger(Router.class);

  private static final long[] NO_HASHES = new long[0];
  private static final EvictionPressure.Reading NO_PRESSURE = new EvictionPressure.Reading(0, 0);

  /** 2 MiB per model: remembers about 4M distinct blocks, several times a 64-worker fleet's KV. */
  public static final int DEFAULT_EVICTION_SLOTS = 1 << 19;

  private final WorkerRegistry registry;
  private final Map<String, RoutingPolicy> policies;
  private final RoutingConfig config;
  private final PrefixOverlapSource overlaps;
  private final LoadTracker load;
  private final WorkerHealth health;
  private final StaleViewTrust staleViewTrust;
  private final Predicate<Worker> inEnvoy;
  private final LongSupplier nanoTime;
  private final Supplier<RandomGenerator> rng;
  private final AtomicLong seqs = new AtomicLong();
  /** Held from the lookup to the prediction, so each decision sees the ones before it; owns {@link #pressures}. */
  private final ReentrantLock deciding = new ReentrantLock();
  private final AtomicLong lookupFailures = new AtomicLong();
  /** Per served model (the workers' model name); pruned to the fleet's models when it outgrows them. */
  private final ConcurrentHashMap<String, EvictionPressure> pressures = new ConcurrentHashMap<>();
  /** {@link PrefixOverlapSource#cacheResets} when {@link #pressures} last forgot; under {@link #deciding}. */
  private long cacheResetsSeen;
  private final int evictionSlots;

  private Router(Builder b) {
    this.registry = Objects.requireNonNull(b.registry, "registry");
    this.policies = Map.copyOf(b.policies);
    this.config = b.config;
    this.overlaps = b.overlaps;
    this.load = b.load;
    this.health = b.health;
    this.staleViewTrust = b.staleViewTrust;
    this.inEnvoy = b.inEnvoy;
    this.nanoTime = b.nanoTime;
    this.rng = b.rng;
    this.evictionSlots = b.evictionSlots;
    if (!policies.containsKey(config.defaults().policy())) {
      throw new IllegalArgumentException("default policy `" + config.defaults().policy() + "` is not one of "
          + policies.keySet());
    }
    for (Map.Entry<String, ModelRouting> e : config.models().entrySet()) {
      if (!policies.containsKey(e.getValue().policy())) {
        throw new IllegalArgumentException("policy `" + e.getValue().policy() + "` of model `" + e.getKey()
            + "` is not one of " + policies.keySet());
      }
    }
  }

  /**
   * A router with one default policy and nothing else: no overlaps, no load, no health signals (the skeleton's
   * shape, kept for tests of the request stream).
   */
  public Router(WorkerRegistry registry, RoutingPolicy defaultPolicy, Map<String, RoutingPolicy> policies,
      LongSupplier nanoTime) {
    this(builder(registry).policies(withDefault(policies, defaultPolicy))
        .config(RoutingConfig.defaults(defaultPolicy.name())).nanoTime(nanoTime));
  }

  private static Map<String, RoutingPolicy> withDefault(Map<String, RoutingPolicy> ps, RoutingPolicy d) {
    Map<String, RoutingPolicy> m = new HashMap<>(ps);
    m.put(d.name(), d);
    return m;
  }

  public static Builder builder(WorkerRegistry registry) {
    return new Builder(registry);
  }

  public RoutingConfig config() {
    return config;
  }

  /**
   * The pool cluster ({@code kvrouter_pool_<model>}, {@link ClusterSnapshots#poolCluster}) for a request the router
   * does not route that names {@code model}, or null (no model, or no live worker serving it as its base model that
   * Envoy holds yet: such a request keeps the default route). Envoy's default route spreads over every model's
   * workers, so in a fleet of several models such a request (/tokenize, /v1/messages/count_tokens, /v1/embeddings)
   * otherwise reached a worker of another model and got its 404.
   */
  public String poolFor(String model) {
    if (model == null) {
      return null;
    }
    for (Worker w : registry.current().forModel(model)) {
      if (!w.draining() && inEnvoy.test(w)) {
        return ClusterSnapshots.poolCluster(model);
      }
    }
    return null;
  }

  /**
   * The worker that stores the Responses API response {@code responseId} names ({@code ResponseIds}), for its
   * lifecycle requests (get, delete, cancel, input items); null when the id names no worker of the fleet.
   */
  public Worker storedResponseHolder(String responseId) {
    Integer tag = ResponseIds.tagOf(responseId);
    if (tag != null) {
      for (Worker w : registry.current().all()) {
        if (storesResponses(w, tag)) {
          return w;
        }
      }
    }
    return null;
  }

  public Decision route(RouteRequest req) {
    long t0 = nanoTime.getAsLong();
    long seq = seqs.incrementAndGet();
    String model = req.request().model();
    List<Worker> serving = new ArrayList<>();
    for (Worker w : registry.current().all()) {
      if (w.serves(model)) {
        serving.add(w);
      }
    }
    ModelRouting settings = config.resolve(model, serving.isEmpty() ? null : serving.get(0).model());
    List<String> fallbacks = new ArrayList<>(2);
    RoutingPolicy policy = policies.get(settings.policy());
    if (req.policyOverride() != null && !req.policyOverride().isEmpty()) {
      RoutingPolicy p = policies.get(req.policyOverride());
      if (p != null) {
        policy = p;
      } else {
        fallbacks.add("unknown_policy_override");
      }
    }
    Weights weights = settings.weights();
    if (req.weightsOverride() != null) {
      try {
        weights = weights.withOverrides(req.weightsOverride());
      } catch (IllegalArgumentException e) {
        fallbacks.add("invalid_weights_override");
      }
    }
    weights = policy.weights(weights);
    String tenantHash = req.tenantHash();

    PromptInfo prompt = req.prompt();
    long[] hashes = prompt != null ? prompt.blockHashes() : NO_HASHES;
    int blockSize = prompt != null ? prompt.blockSize() : blockSize(serving);
    long promptTokens = prompt != null ? prompt.tokens() : Math.max(0, req.approxPromptTokens());
    if (prompt == null) {
      fallbacks.add("no_tokenization");
    }
    int outputTokens = config.expectedOutputTokens(req.request().maxTokens());
    RequestShape shape = RequestShape.of(promptTokens, blockSize, hashes.length, outputTokens);

    if (serving.isEmpty()) {
      // The record names no model: a name nobody serves is the client's own text, of any length and content.
      return reject(seq, req, null, policy, "model_not_served", fallbacks, OpenAiError.modelNotFound(model),
          detail(tenantHash, prompt, req, promptTokens, shape, outputTokens, List.of(), null, 0, 0, 0, NO_PRESSURE),
          t0);
    }

    deciding.lock();
    try {
      long tl = nanoTime.getAsLong();
      PrefixOverlapSource.Lookup lookup = null;
      if (hashes.length > 0) {
        try {
          lookup = overlaps.lookup(hashes);
        } catch (RuntimeException e) {
          // A broken index must not fail requests: route on load, visibly.
          fallbacks.add("overlap_lookup_failed");
          logLookupFailure(e);
        }
      }
      long lookupNanos = nanoTime.getAsLong() - tl;

      long ts = nanoTime.getAsLong();
      List<Candidate> all = new ArrayList<>(serving.size());
      List<Candidate> hard = new ArrayList<>(serving.size());
      List<Candidate> unconfirmed = new ArrayList<>(0);
      for (Worker w : serving) {
        boolean held = inEnvoy.test(w);
        for (WorkerId id : w.cacheOwners()) {
          Candidate c = new Candidate(w, id);
          if (lookup != null) {
            c.overlap = overlapOf(lookup, id, fallbacks);
            if (c.overlap.stale()) {
              c.viewTrust = staleViewTrust.trust(id);
            }
          }
          if (load != null) {
            c.load = load.load(id);
            c.lastTurn = load.ledger().lastTurn(id);
            c.activeSharedBlocks = hashes.length > 0 ? load.activePrefixBlocks(id, hashes) : 0;
          }
          if (w.draining()) {
            c.whyNot = "draining";
          } else if (w.role() == Worker.Role.PREFILL) {
            c.whyNot = "role";
          } else if (!held) {
            // Envoy would answer 503 (no such cluster) until it holds the worker's cluster (EnvoyClusters)
            c.whyNot = "not_in_envoy";
            unconfirmed.add(c);
          } else {
            hard.add(c);
          }
          all.add(c);
        }
      }
      // A Responses request continuing a stored response goes where that response is stored (ResponseIds): any
      // other worker would answer 404. Draining, unhealthy or busy, the holder is the only one that can serve it.
      List<Candidate> pinned = storedResponseHolder(req, all);
      if (!pinned.isEmpty()) {
        for (Candidate c : pinned) {
          c.whyNot = null;
        }
        hard = pinned;
      }
      if (hard.isEmpty() && !unconfirmed.isEmpty()) {
        // No worker Envoy is known to hold: one it may hold (an Envoy that reconnected naming a version this
        // process did not publish) beats refusing the request.
        fallbacks.add("not_in_envoy");
        for (Candidate c : unconfirmed) {
          c.whyNot = null;
        }
        hard = unconfirmed;
      }
      if (hard.isEmpty()) {
        return reject(seq, req, model, policy, "no_eligible_worker", fallbacks,
            OpenAiError.noEligibleWorker(model, "all " + serving.size() + " workers are draining or prefill-only"),
            detail(tenantHash, prompt, req, promptTokens, shape, outputTokens, all, null, 0, lookupNanos,
                nanoTime.getAsLong() - ts, NO_PRESSURE), t0);
      }

      List<Candidate> healthy = new ArrayList<>(hard.size());
      for (Candidate c : hard) {
        String why = pinned.isEmpty() ? health.unhealthyReason(c.worker().name()) : null;
        if (why == null) {
          healthy.add(c);
        } else {
          c.whyNot = why;
        }
      }
      if (healthy.isEmpty()) {
        fallbacks.add("all_unhealthy");
        for (Candidate c : hard) {
          c.whyNot = null;
        }
        healthy = hard;
      }

      List<Candidate> pool = new ArrayList<>(healthy.size());
      BusyThresholds busy = settings.busy();
      for (Candidate c : healthy) {
        String why = pinned.isEmpty() ? busy.check(c.load) : null;
        if (why == null) {
          pool.add(c);
        } else {
          c.whyNot = why;
        }
      }
      boolean allBusy = pool.isEmpty();
      if (allBusy) {
        if (settings.whenAllBusy() == ModelRouting.WhenAllBusy.REJECT) {
          return reject(seq, req, model, policy, "all_busy", fallbacks, OpenAiError.overloaded(model),
              detail(tenantHash, prompt, req, promptTokens, shape, outputTokens, all, null, 0, lookupNanos,
                  nanoTime.getAsLong() - ts, NO_PRESSURE), t0);
        }
        fallbacks.add("all_busy");
        pool = healthy;
      }

      EvictionPressure.Reading pressure =
          hashes.length > 0 && lookup != null ? pressure(serving, all, hashes) : NO_PRESSURE;
      CostModel.score(pool, weights, shape, pressure.chargedShare(all.size()), pressure.hotExcess(all.size()),
          pressure.ownerShare(all.size()));
      if (lookup != null) {
        for (Candidate c : pool) {
          if (c.overlap.stale()) {
            fallbacks.add("stale_events");
            break;
          }
        }
      }
      Scoring scoring = new Scoring(req, pool, weights, shape, hashes.length > 0, rng.get());
      RoutingPolicy.Choice choice;
      if (allBusy) {
        choice = new RoutingPolicy.Choice(LeastLoadPolicy.pick(scoring), "all_busy_least_loaded");
      } else {
        choice = policy.choose(scoring);
      }
      Candidate chosen = choice.candidate();
      if (allBusy) {
        // The busy ones were routed to on purpose; their why_not stays in the record, the choice is eligible.
        chosen.whyNot = null;
      }
      long scoreNanos = nanoTime.getAsLong() - ts;

      Reservation reservation = Reservation.NONE;
      if (load != null) {
        long prefillTokens = Math.max(0, promptTokens - Math.round(chosen.creditBlocks * blockSize));
        // bounded so that the reservation's blocks (hashes + unique) stay an int
        int unique = (int) Math.min(Integer.MAX_VALUE - hashes.length,
            (long) shape.promptBlocks() - shape.fullBlocks() + shape.outputBlocks());
        reservation = load.ledger().reserve(chosen.id(), prefillTokens, hashes, unique, promptTokens, blockSize);
      }
      if (hashes.length > 0) {
        try {
          overlaps.recordPrediction(chosen.id(), hashes);
        } catch (RuntimeException e) {
          logLookupFailure(e);
        }
      }
      long predicted = CostModel.predictedCachedTokens(chosen.overlap, shape);
      Decision.Detail detail = detail(tenantHash, prompt, req, promptTokens, shape, outputTokens, all, chosen,
          predicted, lookupNanos, scoreNanos, pressure);
      return new Decision(seq, req.id(), model, policy.name(), chosen.worker(), chosen.id().dpRank(),
          pinned.isEmpty() ? choice.reason() : "stored_response", join(fallbacks), null, detail, reservation,
          nanoTime.getAsLong() - t0);
    } finally {
      deciding.unlock();
    }
  }

  /**
   * The candidates of the worker whose id the request's {@code previous_response_id} carries (its data-parallel
   * ranks share one API server, so one store), prefill-only workers aside; empty when there is none.
   */
  private static List<Candidate> storedResponseHolder(RouteRequest req, List<Candidate> all) {
    InferenceRequest.ResponsesFields r = req.request().responses();
    Integer tag = r == null ? null : ResponseIds.tagOf(r.previousResponseId());
    if (tag == null) {
      return List.of();
    }
    List<Candidate> holder = new ArrayList<>(1);
    for (Candidate c : all) {
      if (storesResponses(c.worker(), tag)) {
        holder.add(c);
      }
    }
    return holder;
  }

  /** Whether {@code w} is the worker the response ids tagged {@code tag} name; prefill-only workers answer none. */
  private static boolean storesResponses(Worker w, int tag) {
    return w.role() != Worker.Role.PREFILL && ResponseIds.tag(w.name()) == tag;
  }

  private Decision reject(long seq, RouteRequest req, String model, RoutingPolicy policy, String reason,
      List<String> fallbacks, OpenAiError error, Decision.Detail detail, long t0) {
    return new Decision(seq, req.id(), model, policy.name(), null, -1, reason, join(fallbacks),
        error, detail, Reservation.NONE, nanoTime.getAsLong() - t0);
  }

  private static Decision.Detail detail(String tenantHash, PromptInfo prompt, RouteRequest req, long promptTokens,
      RequestShape shape, int outputTokens, List<Candidate> candidates, Candidate chosen, long predicted,
      long lookupNanos, long scoreNanos, EvictionPressure.Reading pressure) {
    String unavailable = prompt != null ? null
        : req.promptUnavailable() != null ? req.promptUnavailable() : "not_tokenized";
    return new Decision.Detail(tenantHash, promptTokens, prompt != null, unavailable, shape, outputTokens,
        candidates, chosen, predicted, lookupNanos, scoreNanos, req.timings(), req.request().stream(), pressure);
  }

  /**
   * The model's eviction pressure before this request, then records the request: the blocks beyond the longest
   * prefix any worker holds by its events or has in flight (the ledger's active prefix: a sibling or a turn still
   * prefilling there is pending, not evicted), the ineligible workers too (their copies still exist). Predicted
   * entries do not count: they live for seconds whatever the worker evicts, so on a cache turning over that fast
   * they would hide exactly the evictions this measures. A stale worker counts by its view as far as the router
   * credits it ({@link StaleViewTrust}), else by its predictions: otherwise a document held only by stale views
   * would look unheld, its heat would go unmeasured, and the relief for hot prefixes would never spread it.
   */
  private EvictionPressure.Reading pressure(List<Worker> serving, List<Candidate> all, long[] hashes) {
    int held = 0;
    for (int i = 0; i < all.size(); i++) {
      Candidate c = all.get(i);
      int events = !c.overlap.stale() ? c.overlap.cached()
          : c.viewTrust > 0 ? Math.max(c.overlap.cached(), c.overlap.predicted()) : c.overlap.predicted();
      held = Math.max(held, Math.max(events, c.activeSharedBlocks));
    }
    long resets = overlaps.cacheResets();
    if (resets != cacheResetsSeen) {
      // A worker's cache was emptied (cleared, restarted): its blocks coming back are not evictions for want of
      // memory, so every model's table forgets what it had seen (what it measured so far still decays away).
      cacheResetsSeen = resets;
      pressures.values().forEach(EvictionPressure::forgetSeen);
    }
    String model = serving.get(0).model();
    EvictionPressure p = pressures.get(model);
    if (p == null) {
      if (pressures.size() >= 16) { // models that left the fleet: forget them
        Set<String> live = new HashSet<>();
        registry.current().all().forEach(w -> live.add(w.model()));
        pressures.keySet().retainAll(live);
      }
      p = pressures.computeIfAbsent(model, m -> {
        EvictionPressure created = new EvictionPressure(evictionSlots);
        log.info("eviction pressure table for model {}: {} bytes", m, created.bytes());
        return created;
      });
    }
    return p.observe(hashes, held);
  }

  private Overlap overlapOf(PrefixOverlapSource.Lookup lookup, WorkerId id, List<String> fallbacks) {
    try {
      Overlap o = lookup.overlap(id);
      return o == null ? Overlap.NONE : o;
    } catch (RuntimeException e) {
      if (!fallbacks.contains("overlap_lookup_failed")) {
        fallbacks.add("overlap_lookup_failed");
      }
      logLookupFailure(e);
      return Overlap.NONE;
    }
  }

  private void logLookupFailure(RuntimeException e) {
    long n = lookupFailures.incrementAndGet();
    if (n == 1 || Long.bitCount(n) == 1) { // the first, then at powers of two: visible, never a flood
      log.error("the prefix overlap source failed ({} times so far); routing on load meanwhile", n, e);
    }
  }

  private int blockSize(List<Worker> serving) {
    for (Worker w : serving) {
      if (w.blockSize() > 0) {
        return w.blockSize();
      }
    }
    return config.defaultBlockSize();
  }

  private static String join(List<String> fallbacks) {
    return fallbacks.isEmpty() ? null : String.join(",", fallbacks);
  }

  /** Explicit wiring; everything but the registry has a default that does nothing. */
  public static final class Builder {
    private final WorkerRegistry registry;
    private Map<String, RoutingPolicy> policies = StandardPolicies.create();
    private RoutingConfig config = RoutingConfig.defaults(KvAwarePolicy.NAME);
    private PrefixOverlapSource overlaps = PrefixOverlapSource.NONE;
    private LoadTracker load;
    private WorkerHealth health = WorkerHealth.alwaysHealthy();
    private StaleViewTrust staleViewTrust = StaleViewTrust.NONE;
    private Predicate<Worker> inEnvoy = w -> true;
    private LongSupplier nanoTime = System::nanoTime;
    private Supplier<RandomGenerator> rng = ThreadLocalRandom::current;
    private int evictionSlots = DEFAULT_EVICTION_SLOTS;

    private Builder(WorkerRegistry registry) {
      this.registry = registry;
    }

    public Builder policies(Map<String, RoutingPolicy> p) {
      this.policies = p;
      return this;
    }

    public Builder config(RoutingConfig c) {
      this.config = c;
      return this;
    }

    public Builder overlaps(PrefixOverlapSource o) {
      this.overlaps = o;
      return this;
    }

    /** The load view; without one every load reads zero and nothing is reserved. */
    public Builder load(LoadTracker l) {
      this.load = l;
      return this;
    }

    public Builder health(WorkerHealth h) {
      this.health = h;
      return this;
    }

    /**
     * How far stale views have been confirmed by usage reports; without one a stale view is credited nothing (its
     * worker scored on predicted entries alone). Feed it the outcomes and the event plane's stale transitions.
     */
    public Builder staleViewTrust(StaleViewTrust t) {
      this.staleViewTrust = Objects.requireNonNull(t, "staleViewTrust");
      return this;
    }

    /**
     * Whether Envoy holds a worker's cluster yet ({@code EnvoyGate#holds}: every Envoy on this process's xDS server
     * and on the other replicas'); a worker it does not hold is routed to only when no other is eligible. Every
     * worker by default.
     */
    public Builder inEnvoy(Predicate<Worker> p) {
      this.inEnvoy = Objects.requireNonNull(p, "inEnvoy");
      return this;
    }

    public Builder nanoTime(LongSupplier n) {
      this.nanoTime = n;
      return this;
    }

    /** Randomness for tie-breaks and sampling; {@code ThreadLocalRandom} by default, a seeded one in tests. */
    public Builder random(Supplier<RandomGenerator> r) {
      this.rng = r;
      return this;
    }

    /** Fingerprint slots of each model's {@link EvictionPressure} (4 bytes each, one table per served model). */
    public Builder evictionSlots(int slots) {
      EvictionPressure.checkSlots(slots); // here, not at the first request of a model
      this.evictionSlots = slots;
      return this;
    }

    public Router build() {
      return new Router(this);
    }
  }
}
