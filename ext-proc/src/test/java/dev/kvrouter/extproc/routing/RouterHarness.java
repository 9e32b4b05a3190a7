package dev.kvrouter.extproc.routing;

import dev.kvrouter.extproc.load.FakeClock;
import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.LoadTracker;
import dev.kvrouter.extproc.load.ScrapedLoad;
import dev.kvrouter.extproc.load.WorkerHealth;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/** A router over a hand-made fleet with every input under the test's control. */
final class RouterHarness {

  static final String MODEL = "m";
  static final int B = 16;

  final FakeClock clock = new FakeClock();
  final WorkerRegistry registry = new WorkerRegistry();
  final LoadLedger ledger = new LoadLedger(clock, TimeUnit.SECONDS.toNanos(300), 100_000);
  final Map<WorkerId, ScrapedLoad> scraped = new ConcurrentHashMap<>();
  final LoadTracker load = new LoadTracker(ledger, scraped::get, clock, TimeUnit.SECONDS.toNanos(2));
  final WorkerHealth health = new WorkerHealth(clock, 3, 5, TimeUnit.SECONDS.toNanos(30));
  /** Overlap per cache owner, as the index would answer; absent = nothing cached. */
  final Map<WorkerId, Overlap> overlaps = new ConcurrentHashMap<>();
  final List<String> predictions = new ArrayList<>();
  /** Worker caches emptied so far, as the index counts them. */
  final java.util.concurrent.atomic.AtomicLong cacheResets = new java.util.concurrent.atomic.AtomicLong();
  final Random random = new Random(1234);
  RoutingConfig config = new RoutingConfig(ModelRouting.defaults(KvAwarePolicy.NAME), Map.of(), B, 0, 0);
  StaleViewTrust staleViewTrust = StaleViewTrust.NONE;
  private Router router;

  final PrefixOverlapSource source = new PrefixOverlapSource() {
    @Override
    public Lookup lookup(long[] blockHashes) {
      return id -> overlaps.getOrDefault(id, Overlap.NONE);
    }

    @Override
    public long cacheResets() {
      return cacheResets.get();
    }

    @Override
    public void recordPrediction(WorkerId worker, long[] blockHashes) {
      synchronized (predictions) {
        predictions.add(worker + ":" + blockHashes.length);
      }
    }
  };

  static Worker worker(String name) {
    return worker(name, 1, Worker.Role.BOTH, false);
  }

  static Worker worker(String name, int dp, Worker.Role role, boolean draining) {
    return new Worker(name, "10.0.0." + Math.abs(name.hashCode() % 200), 8000, MODEL, List.of("lora-x"), role, null,
        dp, B, 1, null, draining, Map.of());
  }

  RouterHarness fleet(Worker... ws) {
    registry.replace(List.of(ws));
    router = null;
    return this;
  }

  RouterHarness config(RoutingConfig c) {
    this.config = c;
    router = null;
    return this;
  }

  /** Which workers Envoy holds ({@code EnvoyClusters#holds}); all by default. */
  java.util.function.Predicate<Worker> inEnvoy = w -> true;

  RouterHarness settings(ModelRouting m) {
    return config(new RoutingConfig(m, Map.of(), B, 0, 0));
  }

  Router router() {
    if (router == null) {
      router = Router.builder(registry).config(config).overlaps(source).load(load).health(health)
          .staleViewTrust(staleViewTrust).inEnvoy(w -> inEnvoy.test(w)).nanoTime(clock).random(() -> random)
          .build();
    }
    return router;
  }

  /** A prompt of {@code shared} blocks from chain {@code family} then {@code own} blocks unique to {@code serial}. */
  static PromptInfo prompt(int family, int shared, int own, int serial) {
    long[] h = new long[shared + own];
    for (int i = 0; i < shared; i++) {
      h[i] = family * 1_000_000L + i;
    }
    for (int i = 0; i < own; i++) {
      h[shared + i] = (serial + 1) * 1_000_000_000L + i;
    }
    return new PromptInfo(h.length * B, B, h);
  }

  static RouteRequest request(PromptInfo p) {
    return new RouteRequest("r", new InferenceRequest(InferenceRequest.Kind.COMPLETIONS, MODEL, false, null, -1),
        null, null, null, p, null, 0, null);
  }

  Decision route(PromptInfo p) {
    return router().route(request(p));
  }

  Decision route(RouteRequest r) {
    return router().route(r);
  }
}
