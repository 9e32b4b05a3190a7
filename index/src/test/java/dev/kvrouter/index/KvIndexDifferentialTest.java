package dev.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The concurrent index against {@link ReferenceIndex} with seeded random operations (style.md habit 9):
 * a serial lane checked after every operation, a concurrent lane (writer threads per worker, reader threads
 * looking up and predicting) checked at quiescent checkpoints, and a progress lane that pins down what an
 * optimistic read may return while a writer runs. Failures print the seed and step.
 *
 * <p>The histories here are arbitrary (any block removed in any order, parents before children), which only a walk
 * answers exactly. The serial lane runs them twice: with the walk ({@code prefixJump} 0) on unmarked workers, and
 * with the default configuration (jump search) on workers marked not prefix-closed
 * ({@link WorkerView#markNotPrefixClosed}), which must then be read block by block whatever they evict; the
 * concurrent lane runs the default configuration with marked workers.
 */
@Timeout(120)
class KvIndexDifferentialTest {

  private static final Duration SHORT_TTL = Duration.ofMillis(500);
  private static final Duration LONG_TTL = Duration.ofMillis(3000);

  /** Documents: chains of our block hashes that share prefixes, so prefix matches are non-trivial. */
  static long[][] documents(SplittableRandom r, int n, int len) {
    long[][] docs = new long[n][];
    for (int k = 0; k < n; k++) {
      long[] d = new long[len];
      int shared = k == 0 ? 0 : r.nextInt(len);
      long[] parent = docs[r.nextInt(Math.max(1, k))];
      for (int i = 0; i < len; i++) {
        d[i] = (k > 0 && i < shared) ? parent[i] : r.nextLong();
      }
      docs[k] = d;
    }
    return docs;
  }

  static long engineHash(WorkerId w, long our) {
    return Mix.mix(our ^ (w.hashCode() * 0x632BE59BD9B4E019L));
  }

  /**
   * A lookup of {@code q[0, n)} and its longest held prefix, both as the model answers them. {@code cursor} and
   * {@code out} are the caller's, reused across calls as a router thread reuses them.
   */
  static void assertLookupMatchesModel(KvIndex index, PrefixCursor cursor, PrefixMatches out, ReferenceIndex ref,
      long[] q, int n, String at) {
    index.lookup(cursor, q, n, out);
    assertThat(ReferenceIndex.of(out)).as(at + " lookup of %d blocks", n).isEqualTo(ref.lookup(q, n));
    assertThat(index.longestHeldPrefix(cursor, q, n)).as(at + " longest of %d blocks", n).isEqualTo(
        ref.lookup(q, n).stream().mapToInt(m -> Math.max(m.matched(), m.predicted())).max().orElse(0));
  }

  static IndexConfig config(int segments) {
    return IndexConfig.defaults().withSegments(segments).withMaxEntries(1_000_000, 1_000_000)
        .withPredictions(SHORT_TTL, LONG_TTL, 1 << 20, 1 << 16);
  }

  @Test
  void serialLaneMatchesTheModelAfterEveryOperation() {
    for (long seed = 1; seed <= 12; seed++) {
      runSerial(seed, 3000, false);
    }
  }

  /** Default configuration (jump search on): workers marked not prefix-closed get exact answers on any history. */
  @Test
  void workersMarkedNotPrefixClosedMatchTheModelUnderTheDefaultJumpSearch() {
    assertThat(IndexConfig.defaults().prefixJump()).isEqualTo(IndexConfig.DEFAULT_JUMP).isPositive();
    for (long seed = 1; seed <= 12; seed++) {
      runSerial(seed, 3000, true);
    }
  }

  /** A view the test marks as an engine that evicts parents first (idempotent; survives clears, not removal). */
  private static WorkerView marked(WorkerView v, boolean mark) {
    if (mark) {
      v.markNotPrefixClosed("test: arbitrary eviction order");
    }
    return v;
  }

  private static final int CLEAR = 0;
  private static final int PREDICT = 1;
  private static final int EXPIRE = 2;
  private static final int LEAVE = 3;

  /**
   * One of the operations the serial lanes share besides stores and removes, applied to the index and the model
   * alike: {@code AllBlocksCleared} on {@code w}, a prediction of a random prefix of {@code doc} for it, time passing
   * (up to 400 ms) and expiry, or {@code w} leaving the index.
   */
  private static void applyToBoth(int op, KvIndex index, ReferenceIndex ref, TestClock clock, WorkerId w,
      long[] doc, SplittableRandom r) {
    switch (op) {
      case CLEAR -> {
        WorkerView v = index.view(w);
        if (v != null) {
          v.clear();
          ref.clear(w);
        }
      }
      case PREDICT -> {
        int n = 1 + r.nextInt(doc.length);
        index.predict(w, doc, n);
        ref.predict(w, doc, n, clock.millis(), SHORT_TTL.toMillis(), LONG_TTL.toMillis());
      }
      case EXPIRE -> {
        clock.advance(r.nextInt(400));
        index.maintain();
        ref.expire(clock.millis());
      }
      case LEAVE -> {
        index.remove(w);
        ref.remove(w);
      }
      default -> throw new IllegalArgumentException("op " + op);
    }
  }

  private void runSerial(long seed, int steps, boolean markAll) {
    SplittableRandom r = new SplittableRandom(seed);
    TestClock clock = new TestClock();
    IndexConfig cfg = config(1 << r.nextInt(5));
    KvIndex index = new KvIndex(markAll ? cfg : cfg.withPrefixJump(0), clock);
    ReferenceIndex ref = new ReferenceIndex();
    WorkerId[] workers = new WorkerId[2 + r.nextInt(70)]; // up to 71 workers: more than one ordinal word
    for (int i = 0; i < workers.length; i++) {
      workers[i] = new WorkerId("w" + i, r.nextInt(3));
    }
    long[][] docs = documents(r, 6, 24);
    PrefixCursor cursor = index.newCursor();
    PrefixMatches out = new PrefixMatches();
    for (int step = 0; step < steps; step++) {
      WorkerId w = workers[r.nextInt(Math.min(workers.length, 8 + step / 50))];
      long[] doc = docs[r.nextInt(docs.length)];
      Tier tier = Tier.values()[r.nextInt(10) < 7 ? 0 : 1 + r.nextInt(2)];
      String at = "seed " + seed + " step " + step;
      int op = r.nextInt(100);
      if (op < 35) {
        int start = r.nextInt(doc.length);
        int len = 1 + r.nextInt(doc.length - start);
        WorkerView v = marked(index.register(w), markAll);
        ref.register(w);
        for (int i = start; i < start + len; i++) {
          if (i > 0) {
            v.store(engineHash(w, doc[i]), doc[i], tier, doc[i - 1]);
          } else {
            v.store(engineHash(w, doc[i]), doc[i], tier);
          }
          ref.store(w, engineHash(w, doc[i]), doc[i], tier);
        }
      } else if (op < 65) {
        int i = r.nextInt(doc.length);
        WorkerView v = index.view(w);
        if (v != null) {
          v.remove(engineHash(w, doc[i]), tier);
          ref.remove(w, engineHash(w, doc[i]), tier);
        }
      } else if (op < 67) {
        applyToBoth(CLEAR, index, ref, clock, w, doc, r);
      } else if (op < 77) {
        applyToBoth(PREDICT, index, ref, clock, w, doc, r);
      } else if (op < 82) {
        applyToBoth(EXPIRE, index, ref, clock, w, doc, r);
      } else if (op < 84) {
        applyToBoth(LEAVE, index, ref, clock, w, doc, r);
      } else if (op < 87) {
        WorkerView v = marked(index.register(w), markAll);
        ref.register(w);
        boolean s = r.nextBoolean();
        v.setStale(s);
        ref.setStale(w, s);
        boolean es = r.nextBoolean();
        v.setEventStream(es);
        ref.setEventStream(w, es);
      }
      // check a few lookups after every operation, all of them now and then
      int checks = step % 100 == 0 ? docs.length : 2;
      for (int k = 0; k < checks; k++) {
        long[] q = docs[k < docs.length && checks == docs.length ? k : r.nextInt(docs.length)];
        int n = r.nextInt(q.length + 1);
        assertLookupMatchesModel(index, cursor, out, ref, q, n, at);
      }
      if (index.view(w) != null) {
        assertThat(index.view(w).size()).as(at + " handles of " + w).isEqualTo(ref.size(w));
        if (markAll && index.view(w).notPrefixClosed() != null) {
          assertThat(index.view(w).open()).as(at + " marked view is walked").isTrue();
        }
      }
    }
  }

  /**
   * Writer threads own disjoint workers and apply per-worker random streams; readers look up and predict
   * concurrently and check invariants of every answer; at each checkpoint (all threads parked) the index must
   * equal the model fed with the same per-worker streams.
   */
  @Test
  void concurrentLaneMatchesTheModelAtCheckpoints() throws Exception {
    for (long seed = 1; seed <= 4; seed++) {
      runConcurrent(seed);
    }
  }

  private void runConcurrent(long seed) throws Exception {
    SplittableRandom r = new SplittableRandom(seed);
    TestClock clock = new TestClock();
    KvIndex index = new KvIndex(config(1 << r.nextInt(3)), clock); // few segments: more contention
    ReferenceIndex ref = new ReferenceIndex();
    int writers = 3;
    int readers = 2;
    int phases = 6;
    int opsPerPhase = 1500;
    WorkerId[] workers = new WorkerId[writers * 4];
    for (int i = 0; i < workers.length; i++) {
      workers[i] = new WorkerId("w" + i, i % 2);
      marked(index.register(workers[i]), true).setEventStream(true);
      ref.register(workers[i]);
      ref.setEventStream(workers[i], true);
    }
    long[][] docs = documents(r, 8, 32);
    // per writer thread, per phase: a list of ops {workerIdx, kind, doc, i, tier}
    int[][][][] plan = new int[writers][phases][opsPerPhase][];
    for (int t = 0; t < writers; t++) {
      for (int ph = 0; ph < phases; ph++) {
        for (int k = 0; k < opsPerPhase; k++) {
          int wi = t + writers * r.nextInt(4);
          int kind = r.nextInt(100) < 55 ? 0 : r.nextInt(100) < 98 ? 1 : 2;
          plan[t][ph][k] = new int[] {wi, kind, r.nextInt(docs.length), r.nextInt(32), r.nextInt(3)};
        }
      }
    }
    CyclicBarrier start = new CyclicBarrier(writers + readers + 1);
    CyclicBarrier end = new CyclicBarrier(writers + readers + 1);
    AtomicBoolean writing = new AtomicBoolean();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    Map<String, Boolean> predictedByReaders = new ConcurrentHashMap<>();
    List<Thread> threads = new ArrayList<>();
    for (int t = 0; t < writers; t++) {
      int tt = t;
      threads.add(new Thread(() -> {
        try {
          for (int ph = 0; ph < phases; ph++) {
            start.await(30, TimeUnit.SECONDS);
            for (int[] op : plan[tt][ph]) {
              apply(index.view(workers[op[0]]), workers[op[0]], op, docs);
            }
            end.await(30, TimeUnit.SECONDS);
          }
        } catch (Throwable e) {
          failure.compareAndSet(null, e);
        }
      }, "writer-" + t));
    }
    for (int t = 0; t < readers; t++) {
      int tt = t;
      threads.add(new Thread(() -> {
        SplittableRandom rr = new SplittableRandom(seed * 1000 + tt);
        PrefixCursor cursor = index.newCursor();
        PrefixMatches out = new PrefixMatches();
        try {
          for (int ph = 0; ph < phases; ph++) {
            start.await(30, TimeUnit.SECONDS);
            for (int k = 0; k < 3000 && writing.get(); k++) {
              long[] q = docs[rr.nextInt(docs.length)];
              int n = rr.nextInt(q.length + 1);
              index.lookup(cursor, q, n, out);
              for (int i = 0; i < out.size(); i++) {
                assertThat(out.gpuBlocks(i) + out.cpuBlocks(i) + out.diskBlocks(i)).isEqualTo(out.matchedBlocks(i));
                assertThat(out.overlapBlocks(i)).isBetween(1, n);
                assertThat(out.worker(i).name()).startsWith("w");
              }
              if (rr.nextInt(50) == 0) {
                int d = rr.nextInt(docs.length);
                int w = rr.nextInt(workers.length);
                int len = 1 + rr.nextInt(8);
                if (index.predict(workers[w], docs[d], len)) {
                  predictedByReaders.put(w + "/" + d + "/" + len, true);
                }
              }
            }
            end.await(30, TimeUnit.SECONDS);
          }
        } catch (Throwable e) {
          failure.compareAndSet(null, e);
        }
      }, "reader-" + t));
    }
    threads.forEach(Thread::start);
    PrefixCursor cursor = index.newCursor();
    PrefixMatches out = new PrefixMatches();
    for (int ph = 0; ph < phases; ph++) {
      writing.set(true);
      start.await(30, TimeUnit.SECONDS);
      // let readers run while writers work; writers finish their fixed plan
      Thread.sleep(5);
      writing.set(false);
      end.await(60, TimeUnit.SECONDS);
      if (failure.get() != null) {
        throw new AssertionError("seed " + seed + " phase " + ph, failure.get());
      }
      // quiescent checkpoint: feed the model the same per-worker streams (order within a worker is what counts)
      for (int t = 0; t < writers; t++) {
        for (int[] op : plan[t][ph]) {
          applyRef(ref, workers[op[0]], op, docs);
        }
      }
      for (String p : predictedByReaders.keySet()) {
        String[] f = p.split("/");
        ref.predict(workers[Integer.parseInt(f[0])], docs[Integer.parseInt(f[1])], Integer.parseInt(f[2]),
            clock.millis(), SHORT_TTL.toMillis(), LONG_TTL.toMillis());
      }
      index.maintain();
      for (long[] q : docs) {
        for (int n : new int[] {1, 7, q.length}) {
          index.lookup(cursor, q, n, out);
          assertThat(ReferenceIndex.of(out)).as("seed %d checkpoint %d", seed, ph).isEqualTo(ref.lookup(q, n));
        }
      }
      for (WorkerId w : workers) {
        assertThat(index.view(w).size()).as("seed %d checkpoint %d %s", seed, ph, w).isEqualTo(ref.size(w));
      }
    }
    for (Thread t : threads) {
      t.join(10_000);
      assertThat(t.isAlive()).as("thread %s ended", t.getName()).isFalse();
    }
  }

  private static void apply(WorkerView v, WorkerId w, int[] op, long[][] docs) {
    long our = docs[op[2]][op[3]];
    Tier tier = Tier.values()[op[4]];
    switch (op[1]) {
      case 0 -> {
        // store a run from this block on, as an engine would (a chain segment)
        for (int i = op[3]; i < Math.min(docs[op[2]].length, op[3] + 4); i++) {
          v.store(engineHash(w, docs[op[2]][i]), docs[op[2]][i], tier);
        }
      }
      case 1 -> v.remove(engineHash(w, our), tier);
      default -> v.clear();
    }
  }

  private static void applyRef(ReferenceIndex ref, WorkerId w, int[] op, long[][] docs) {
    long our = docs[op[2]][op[3]];
    Tier tier = Tier.values()[op[4]];
    switch (op[1]) {
      case 0 -> {
        for (int i = op[3]; i < Math.min(docs[op[2]].length, op[3] + 4); i++) {
          ref.store(w, engineHash(w, docs[op[2]][i]), docs[op[2]][i], tier);
        }
      }
      case 1 -> ref.remove(w, engineHash(w, our), tier);
      default -> ref.clear(w);
    }
  }

  /**
   * What an optimistic read may return while writers run: writers store chains block by block and publish
   * their progress after each store (and their intent before it); a lookup must see at least the progress
   * read before it started and at most the intent read after it ended. Table resizes happen during the run
   * (the table starts small).
   */
  @Test
  void lookupsSeeCompletedStoresAndNothingNotYetStored() throws Exception {
    long seed = 7;
    SplittableRandom r = new SplittableRandom(seed);
    KvIndex index = new KvIndex(config(2), Clock.systemUTC());
    int workers = 4;
    int chains = 40;
    int len = 64;
    long[][] docs = new long[chains][len];
    for (long[] d : docs) {
      for (int i = 0; i < len; i++) {
        d[i] = r.nextLong();
      }
    }
    AtomicLongArray progress = new AtomicLongArray(workers * chains);
    AtomicLongArray attempted = new AtomicLongArray(workers * chains);
    AtomicReference<Throwable> failure = new AtomicReference<>();
    AtomicBoolean done = new AtomicBoolean();
    WorkerId[] ids = new WorkerId[workers];
    for (int w = 0; w < workers; w++) {
      ids[w] = WorkerId.of("p" + w);
      index.register(ids[w]);
    }
    List<Thread> threads = new ArrayList<>();
    for (int w = 0; w < workers; w++) {
      int ww = w;
      threads.add(new Thread(() -> {
        WorkerView v = index.view(ids[ww]);
        for (int c = 0; c < chains; c++) {
          for (int i = 0; i < len; i++) {
            attempted.set(ww * chains + c, i + 1);
            v.store(engineHash(ids[ww], docs[c][i]), docs[c][i], Tier.GPU);
            progress.set(ww * chains + c, i + 1);
          }
        }
      }, "writer-" + w));
    }
    for (int t = 0; t < 2; t++) {
      int tt = t;
      threads.add(new Thread(() -> {
        SplittableRandom rr = new SplittableRandom(seed + tt);
        PrefixCursor cursor = index.newCursor();
        PrefixMatches out = new PrefixMatches();
        try {
          long lookups = 0;
          while (!done.get() && lookups < 2_000_000) {
            int c = rr.nextInt(chains);
            long[] before = new long[workers];
            for (int w = 0; w < workers; w++) {
              before[w] = progress.get(w * chains + c);
            }
            index.lookup(cursor, docs[c], len, out);
            for (int w = 0; w < workers; w++) {
              long after = attempted.get(w * chains + c);
              int i = out.indexOf(ids[w]);
              int seen = i < 0 ? 0 : out.matchedBlocks(i);
              if (seen < before[w] || seen > after) {
                throw new AssertionError("worker " + w + " chain " + c + ": saw " + seen + " blocks, " + before[w]
                    + " stored before the lookup and " + after + " attempted after it (lookup " + lookups + ")");
              }
            }
            lookups++;
          }
        } catch (Throwable e) {
          failure.compareAndSet(null, e);
        }
      }, "reader-" + t));
    }
    threads.forEach(Thread::start);
    for (int w = 0; w < workers; w++) {
      threads.get(w).join(60_000);
    }
    done.set(true);
    for (Thread t : threads) {
      t.join(10_000);
    }
    if (failure.get() != null) {
      throw new AssertionError("seed " + seed, failure.get());
    }
    PrefixMatches out = index.lookup(docs[3], len);
    assertThat(out.size()).isEqualTo(workers);
    assertThat(Arrays.stream(ids).mapToInt(id -> out.matchedBlocks(out.indexOf(id))).min().orElse(0)).isEqualTo(len);
  }

  /**
   * Five workers storing, removing, clearing, predicting and leaving over one document made of
   * {@link BlockTableTest#SPECIAL} hashes, each with those hashes as engine handles too (the handle map keeps key 0
   * aside), every worker marked not prefix-closed (the model reads every block) and the jump search on or off: every
   * lookup and every worker's size must match the model.
   */
  @Test
  void specialBlockAndEngineHashesMatchTheModel() {
    long[] special = BlockTableTest.SPECIAL;
    for (long seed = 1; seed <= 30; seed++) {
      SplittableRandom r = new SplittableRandom(seed);
      TestClock clock = new TestClock();
      KvIndex index = new KvIndex(config(1 << r.nextInt(3)).withPrefixJump(r.nextBoolean() ? 0 : 2), clock);
      ReferenceIndex ref = new ReferenceIndex();
      WorkerId[] ws = new WorkerId[5];
      for (int i = 0; i < ws.length; i++) {
        ws[i] = WorkerId.of("w" + i);
      }
      // one document made of the special values (a permutation), engine hashes: special values too, per worker
      long[] doc = shuffled(special, r);
      long[][] eng = new long[ws.length][];
      for (int w = 0; w < ws.length; w++) {
        eng[w] = shuffled(special, r);
      }
      for (int step = 0; step < 3000; step++) {
        int wi = r.nextInt(ws.length);
        WorkerId w = ws[wi];
        Tier tier = Tier.values()[r.nextInt(10) < 7 ? 0 : 1 + r.nextInt(2)];
        int op = r.nextInt(100);
        if (op < 40) {
          int start = r.nextInt(doc.length);
          int len = 1 + r.nextInt(doc.length - start);
          WorkerView v = index.register(w);
          v.markNotPrefixClosed("test");
          ref.register(w);
          for (int i = start; i < start + len; i++) {
            v.store(eng[wi][i], doc[i], tier);
            ref.store(w, eng[wi][i], doc[i], tier);
          }
        } else if (op < 80) {
          int i = r.nextInt(doc.length);
          WorkerView v = index.view(w);
          if (v != null) {
            v.remove(eng[wi][i], tier);
            ref.remove(w, eng[wi][i], tier);
          }
        } else if (op < 83) {
          applyToBoth(CLEAR, index, ref, clock, w, doc, r);
        } else if (op < 93) {
          applyToBoth(PREDICT, index, ref, clock, w, doc, r);
        } else if (op < 97) {
          applyToBoth(EXPIRE, index, ref, clock, w, doc, r);
        } else {
          applyToBoth(LEAVE, index, ref, clock, w, doc, r);
        }
        String at = "seed " + seed + " step " + step;
        int n = r.nextInt(doc.length + 1);
        assertThat(ReferenceIndex.of(index.lookup(doc, n))).as(at).isEqualTo(ref.lookup(doc, n));
        if (index.view(w) != null) {
          assertThat(index.view(w).size()).as(at + " size").isEqualTo(ref.size(w));
        }
      }
    }
  }

  /** A random permutation of {@code values} (Fisher-Yates). */
  private static long[] shuffled(long[] values, SplittableRandom r) {
    long[] a = values.clone();
    for (int i = a.length - 1; i > 0; i--) {
      int j = r.nextInt(i + 1);
      long x = a[i];
      a[i] = a[j];
      a[j] = x;
    }
    return a;
  }
}
