package dev.kvrouter.bench.index;

import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
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

/**
 * The lookup benchmarks' index, shared by the JMH benchmark and the harnesses so they measure the same thing:
 * a {@code blocks}-block request against {@code workers} workers that all hold its first block, in an index of
 * {@code background} other blocks; 8 churn workers for a concurrent writer; and the same content in a naive
 * {@code ConcurrentHashMap<Long, Set<WorkerId>>} index. Shapes of who holds what of the request:
 * <ul>
 *   <li>{@code staggered} (the expensive case, and the adversarial one for a jump search): worker w holds the
 *       first 2w+2 blocks, the last quarter of each on CPU, so most blocks have dozens of holders and every
 *       worker drops out at a different block;
 *   <li>{@code staggered_gpu}: the same, all on GPU (so a jump search may run on it);
 *   <li>{@code realistic}: what routing by cache affinity leaves behind: every worker holds a 4-block shared
 *       system prompt, three hold long prefixes of this conversation (all 128 blocks, 96, 40; GPU).
 * </ul>
 */
final class LookupFixture {

  static final int CHURN_WORKERS = 8;
  /** {@code jump} value meaning "as {@link IndexConfig#defaults()} configures it". */
  static final int DEFAULT_JUMP = -1;

  /** A benchmark's jump parameter: {@code default} (the product's default configuration) or a stride. */
  static int jump(String param) {
    return param.equals("default") ? DEFAULT_JUMP : Integer.parseInt(param);
  }

  final KvIndex index;
  final long[] request;
  final int blocks;
  private final WorkerView[] churn;
  private final long[] churnBackground;
  private final Map<Long, Set<WorkerId>> naive;
  private final boolean tailFirst;
  /** {@link #writeNext}'s op counter: owned by one writer thread at a time (handed over by Thread.join). */
  private long op;

  LookupFixture(int workers, int blocks, int background) {
    this(workers, blocks, background, "staggered", 0);
  }

  LookupFixture(int workers, int blocks, int background, String shape, int jump) {
    this(workers, blocks, background, shape, jump, false);
  }

  /**
   * @param jump {@link IndexConfig#prefixJump} (0: the exact walk; {@link #DEFAULT_JUMP}: the product default)
   * @param churnInside the writer's churn workers are the last {@value #CHURN_WORKERS} of the {@code workers}
   *     (the fleet stays at {@code workers}, one ordinal word for 64), not 8 more workers (ordinals 64 to 71 for
   *     64 workers: with the writer, lookups then have candidates in two ordinal words)
   */
  LookupFixture(int workers, int blocks, int background, String shape, int jump, boolean churnInside) {
    this.blocks = blocks;
    this.tailFirst = !shape.equals("staggered");
    SplittableRandom r = new SplittableRandom(7);
    IndexConfig config = IndexConfig.defaults().withMaxEntries(64_000_000L, 1 << 20);
    index = new KvIndex(jump == DEFAULT_JUMP ? config : config.withPrefixJump(jump), Clock.systemUTC());
    request = new long[blocks];
    for (int i = 0; i < blocks; i++) {
      request[i] = r.nextLong();
    }
    int perWorker = background / workers;
    naive = new ConcurrentHashMap<>();
    for (int w = 0; w < workers; w++) {
      WorkerId id = WorkerId.of("worker-" + w);
      WorkerView v = index.register(id);
      int held = held(shape, w, blocks);
      for (int i = 0; i < held; i++) {
        boolean cpu = shape.equals("staggered") && i >= held * 3 / 4;
        v.store(request[i] ^ w, request[i], cpu ? Tier.CPU : Tier.GPU);
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
      // inside: the churn stores name blocks the worker may already hold by another engine hash (counted twice)
      churn[c] = churnInside ? index.view(WorkerId.of("worker-" + (workers - CHURN_WORKERS + c)))
          : index.register(WorkerId.of("churn-" + c));
    }
    churnBackground = new long[4096];
    for (int i = 0; i < churnBackground.length; i++) {
      churnBackground[i] = r.nextLong();
    }
  }

  private static int held(String shape, int w, int blocks) {
    return switch (shape) {
      case "staggered", "staggered_gpu" -> Math.min(blocks, 2 * w + 2);
      case "realistic" -> Math.min(blocks, w == 0 ? blocks : w == 1 ? 96 : w == 2 ? 40 : 4);
      default -> throw new IllegalArgumentException("unknown shape " + shape);
    };
  }

  /** Which blocks the concurrent writer stores and removes. */
  enum WriteTarget {
    /** Every other op on the request's own blocks (lookups race writes to the very slots they read). */
    REQUEST,
    /** Only background blocks: the writer shares no block with the lookup, only the table. */
    BACKGROUND;

    static WriteTarget of(String name) {
      return valueOf(name.toUpperCase(java.util.Locale.ROOT));
    }
  }

  /** {@link #write(long, WriteTarget)} with {@link WriteTarget#REQUEST}. */
  int write(long k) {
    return write(k, WriteTarget.REQUEST);
  }

  /** The writer's next op ({@link #write(long, WriteTarget)} numbered by this fixture's own counter). */
  int writeNext(WriteTarget target) {
    return write(op++, target);
  }

  /** Ops applied through {@link #writeNext}. */
  long ops() {
    return op;
  }

  /**
   * Writes on to the end of the churn cycle, where every churn worker has removed every block it stored, so the
   * next writer (maybe with another target) starts from the fixture's initial state.
   */
  void finishCycle(WriteTarget target) {
    long cycle = (long) CHURN_WORKERS * 2 * blocks;
    while (op % cycle != 0) {
      writeNext(target);
    }
  }

  /**
   * The concurrent writer's op {@code k}: a store or a remove on one of the churn workers. Each churn worker
   * cycles through chains of {@code blocks} blocks: it stores one head first, then removes it; removes go head
   * first in {@code staggered} (the historic fixture, kept as it was so runs compare across versions), tail first
   * in the other shapes, as an engine evicts (so a churn worker's blocks stay prefix-closed, which a jump search
   * relies on). With {@link WriteTarget#REQUEST} the chain is the request itself on even ops, a background chain on
   * odd ops; with {@link WriteTarget#BACKGROUND} always a background chain (a different one each cycle, from a pool
   * of 4,096 blocks). Every op changes the table (a background store and its remove name the same block). Must be
   * called by one thread.
   */
  int write(long k, WriteTarget target) {
    int c = (int) (k % CHURN_WORKERS);
    WorkerView v = churn[c];
    long round = k / CHURN_WORKERS;
    boolean store = (round / blocks) % 2 == 0;
    int i = (int) (round % blocks);
    if (!store && tailFirst) {
      i = blocks - 1 - i;
    }
    long ours;
    long parent;
    if (target == WriteTarget.REQUEST && (k & 1) == 0) {
      ours = request[i];
      parent = i == 0 ? 0 : request[i - 1];
    } else {
      // a chain of its own per churn worker (one holder per block, as most blocks in a fleet)
      long cycle = round / (2L * blocks);
      ours = churnBackground[(int) ((cycle * blocks + i) % churnBackground.length)] ^ (c * 0x9E3779B97F4A7C15L);
      parent = i == 0 ? 0
          : churnBackground[(int) ((cycle * blocks + i - 1) % churnBackground.length)] ^ (c * 0x9E3779B97F4A7C15L);
    }
    if (store) {
      if (i == 0) {
        v.store(ours + 1, ours, Tier.GPU);
      } else {
        v.store(ours + 1, ours, Tier.GPU, parent); // as the event applier stores (the closure check's links)
      }
      return 1;
    }
    return v.remove(ours + 1, Tier.GPU) ? 1 : 0;
  }

  /** The naive design: per block, intersect the set of workers still matching with the block's holders. */
  int naiveLookup() {
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
}
