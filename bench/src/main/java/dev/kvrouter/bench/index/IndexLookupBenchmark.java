package dev.kvrouter.bench.index;

import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.PrefixCursor;
import dev.kvrouter.index.PrefixMatches;
import dev.kvrouter.index.Tier;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.WorkerView;
import java.time.Clock;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Group;
import org.openjdk.jmh.annotations.GroupThreads;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Prefix lookup latency: a 128-block request against 64 workers that all hold its first block and hold
 * staggered prefixes of it (worker w holds the first 2w+2 blocks, the last quarter of each on CPU), in an
 * index of {@code background} other blocks. Sampled per call (p50/p99 from {@code SampleTime}).
 *
 * <p>{@code concurrent}: a writer thread runs at the same time on the same index, storing and removing the
 * request's own blocks on 8 churn workers plus random background blocks, so lookups race with writes to the
 * very segments they read. {@code alone}: the same lookup without the writer, for the ratio.
 * {@code naive}: the same lookup over a straightforward {@code ConcurrentHashMap<Long, Set<WorkerId>>} index
 * (block to holders; per block, keep the workers still matching), the design a first version would use, as a
 * machine-independent yardstick measured in the same run.
 */
@State(Scope.Group)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"-Xms3g", "-Xmx3g"})
public class IndexLookupBenchmark {

  private static final int CHURN_WORKERS = 8;

  @Param({"64"})
  public int workers;

  @Param({"128"})
  public int blocks;

  @Param({"1000000"})
  public int background;

  private KvIndex index;
  private long[] request;
  // reader (one thread in each group)
  private PrefixCursor cursor;
  private PrefixMatches out;
  // writer (one thread in the concurrent group)
  private WorkerView[] churn;
  private long[] churnBackground;
  private long op;
  // naive baseline (block -> holders), same content as the real index minus tiers
  private Map<Long, Set<WorkerId>> naive;

  @Setup(Level.Trial)
  public void setup() {
    SplittableRandom r = new SplittableRandom(7);
    index = new KvIndex(IndexConfig.defaults().withMaxEntries(64_000_000L, 1 << 20), Clock.systemUTC());
    request = new long[blocks];
    for (int i = 0; i < blocks; i++) {
      request[i] = r.nextLong();
    }
    int perWorker = background / workers;
    naive = new ConcurrentHashMap<>();
    for (int w = 0; w < workers; w++) {
      WorkerId id = WorkerId.of("worker-" + w);
      WorkerView v = index.register(id);
      int held = Math.min(blocks, 2 * w + 2);
      for (int i = 0; i < held; i++) {
        v.store(request[i] ^ w, request[i], i >= held * 3 / 4 ? Tier.CPU : Tier.GPU);
        naive.computeIfAbsent(request[i], k -> ConcurrentHashMap.newKeySet()).add(id);
      }
      for (int i = 0; i < perWorker; i++) {
        long h = r.nextLong();
        v.store(h, h, Tier.GPU);
        naive.computeIfAbsent(h, k -> ConcurrentHashMap.newKeySet()).add(id);
      }
    }
    churn = new WorkerView[CHURN_WORKERS];
    for (int c = 0; c < CHURN_WORKERS; c++) {
      churn[c] = index.register(WorkerId.of("churn-" + c));
    }
    churnBackground = new long[4096];
    for (int i = 0; i < churnBackground.length; i++) {
      churnBackground[i] = r.nextLong();
    }
    cursor = index.newCursor();
    out = new PrefixMatches();
  }

  @Benchmark
  @Group("concurrent")
  @GroupThreads(1)
  public int lookup() {
    index.lookup(cursor, request, blocks, out);
    return out.size();
  }

  /** One store or remove per call, alternating over the request's blocks and background blocks. */
  @Benchmark
  @Group("concurrent")
  @GroupThreads(1)
  public int write() {
    long k = op++;
    WorkerView v = churn[(int) (k % CHURN_WORKERS)];
    long round = k / CHURN_WORKERS;
    boolean store = (round / blocks) % 2 == 0;
    int i = (int) (round % blocks);
    long ours = (k & 1) == 0 ? request[i] : churnBackground[(int) (round % churnBackground.length)];
    if (store) {
      v.store(ours + 1, ours, Tier.GPU);
      return 1;
    }
    return v.remove(ours + 1, Tier.GPU) ? 1 : 0;
  }

  /** The naive design: per block, intersect the set of workers still matching with the block's holders. */
  @Benchmark
  @Group("naive")
  @GroupThreads(1)
  public int naiveLookup() {
    Set<WorkerId> first = naive.get(request[0]);
    if (first == null) {
      return 0;
    }
    Map<WorkerId, Integer> matched = new HashMap<>();
    Set<WorkerId> alive = new HashSet<>(first);
    for (int i = 1; i < blocks && !alive.isEmpty(); i++) {
      Set<WorkerId> holders = naive.get(request[i]);
      for (java.util.Iterator<WorkerId> it = alive.iterator(); it.hasNext(); ) {
        WorkerId w = it.next();
        if (holders == null || !holders.contains(w)) {
          matched.put(w, i);
          it.remove();
        }
      }
    }
    for (WorkerId w : alive) {
      matched.put(w, blocks);
    }
    return matched.size();
  }

  @Benchmark
  @Group("alone")
  @GroupThreads(1)
  public int lookupAlone() {
    index.lookup(cursor, request, blocks, out);
    return out.size();
  }
}
