package dev.kvrouter.bench.routing;

import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.LoadTracker;
import dev.kvrouter.extproc.load.ScrapedLoadSource;
import dev.kvrouter.extproc.load.WorkerHealth;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.routing.Decision;
import dev.kvrouter.extproc.routing.ModelRouting;
import dev.kvrouter.extproc.routing.Overlap;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.extproc.routing.PromptInfo;
import dev.kvrouter.extproc.routing.RouteRequest;
import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.extproc.routing.RoutingConfig;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The routing policy's own share of a decision, after tokenization and hashing: N worker ranks with overlaps
 * and live load, a 2,048-token prompt (128 blocks of 16).
 *
 * <ul>
 *   <li>{@code decide}: {@link Router#route} end to end as the request path calls it: candidates from the fleet,
 *       overlap lookup (an in-memory answer; the index's own lookup is benchmarked by the index), ledger reads
 *       including the active-prefix search, eligibility, scoring, choice, the reservation and its release (the
 *       release runs later in production; included here to keep the ledger steady);
 * </ul>
 *
 * <p>{@link ScoringBench} isolates the scoring of N candidates and the ledger bookkeeping.
 *
 * <pre>
 * java -jar bench/target/benchmarks.jar 'routing\.' -f 1 -wi 3 -i 5 -bm sample -tu us \
 *     -rf json -rff bench/results/routing.json
 * </pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(1)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class RoutingBench {

  static final int BLOCK = 16;
  static final int PROMPT_BLOCKS = 128;

  @Param({"8", "64"})
  public int workers;

  @Param({"kv_aware", "round_robin", "least_load"})
  public String policy;

  /**
   * Whether the router asks, per candidate, if every Envoy holds the worker's cluster ({@code EnvoyClusters#holds}:
   * one volatile read and a set lookup by worker name; here the same read over a set holding the whole fleet), as it
   * does in a process that serves xDS; {@code false} is a process without xDS.
   */
  @Param({"false", "true"})
  public boolean envoyGate;

  volatile Set<String> held;
  Router router;
  LoadLedger ledger;
  RouteRequest request;
  long[] hashes;

  @Setup
  public void setup() {
    SplittableRandom rnd = new SplittableRandom(42);
    hashes = new long[PROMPT_BLOCKS];
    for (int i = 0; i < PROMPT_BLOCKS; i++) {
      hashes[i] = 0x9E3779B97F4A7C15L * (i + 1);
    }
    WorkerRegistry registry = new WorkerRegistry();
    List<Worker> fleet = new ArrayList<>();
    Map<WorkerId, Overlap> overlaps = new HashMap<>();
    ledger = new LoadLedger(System::nanoTime, TimeUnit.MINUTES.toNanos(30), 1_000_000);
    for (int w = 0; w < workers; w++) {
      Worker worker = new Worker("w" + w, "10.0." + (w / 250) + "." + (w % 250 + 1), 8000, "m", List.of(),
          Worker.Role.BOTH, null, 1, BLOCK, 1, null, false, Map.of());
      fleet.add(worker);
      WorkerId id = WorkerId.of(worker.name());
      // a spread of cache states: some hold long prefixes, some offloaded, a few stale
      int gpu = rnd.nextInt(PROMPT_BLOCKS);
      Overlap o = new Overlap(gpu, rnd.nextInt(PROMPT_BLOCKS - gpu + 1) / 2, 0, rnd.nextInt(8), w % 16 == 15);
      overlaps.put(id, o);
      // live load: a few in-flight requests per worker, some sharing the benchmark prompt's prefix
      for (int r = 0; r < 4; r++) {
        int shared = r == 0 ? rnd.nextInt(PROMPT_BLOCKS) : 0;
        long[] h = new long[shared + 32];
        System.arraycopy(hashes, 0, h, 0, shared);
        for (int i = shared; i < h.length; i++) {
          h[i] = rnd.nextLong();
        }
        ledger.reserve(id, rnd.nextInt(4096), h, rnd.nextInt(64));
      }
    }
    registry.replace(fleet);
    held = Set.copyOf(fleet.stream().map(Worker::name).toList());
    PrefixOverlapSource source = blockHashes -> id -> overlaps.getOrDefault(id, Overlap.NONE);
    router = Router.builder(registry)
        .config(new RoutingConfig(ModelRouting.defaults(policy), Map.of(), BLOCK, 256, 1024))
        .overlaps(source)
        .load(new LoadTracker(ledger, ScrapedLoadSource.NONE, System::nanoTime, TimeUnit.SECONDS.toNanos(2)))
        .health(new WorkerHealth(System::nanoTime, 3, 5, TimeUnit.SECONDS.toNanos(30)))
        .inEnvoy(envoyGate ? w -> held.contains(w.name()) : w -> true)
        .build();
    request = new RouteRequest("bench", new InferenceRequest(InferenceRequest.Kind.CHAT, "m", true, null, 256),
        RouteRequest.tenantPseudonym("tenant"), null, null, new PromptInfo(PROMPT_BLOCKS * BLOCK, BLOCK, hashes), null, 0, null);
  }

  @Benchmark
  public Decision decide() {
    Decision d = router.route(request);
    ledger.prefillDone(d.reservation());
    ledger.release(d.reservation());
    return d;
  }
}
