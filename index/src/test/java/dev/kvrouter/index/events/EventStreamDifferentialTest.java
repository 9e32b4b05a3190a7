package dev.kvrouter.index.events;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.PrefixCursor;
import dev.kvrouter.index.PrefixMatches;
import dev.kvrouter.index.Tier;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.WorkerView;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import dev.kvrouter.index.wire.AllBlocksCleared;
import dev.kvrouter.index.wire.BlockRemoved;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.EventBatch;
import dev.kvrouter.index.wire.KvEvent;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Engine event streams, through {@link EventApplier}, against a model that counts copies per engine hash (what the
 * engine does) and knows our hash of every block from the request path, not from the applier. What
 * {@link dev.kvrouter.index.KvIndexDifferentialTest} leaves out: engine hashes that are not ours (a chained engine
 * hash per variant), aliases (an older vLLM's integer LoRA ids in the extra keys and hash seeds changed by a restart
 * without {@code AllBlocksCleared}: one of our blocks under several engine hashes), duplicate stores, removes of
 * unknown hashes, stores whose parent is unknown or was removed, offload stores without tokens, salted tenants,
 * {@code AllBlocksCleared} mid-stream, workers leaving and coming back, the index at its capacity bound (it evicts:
 * it may then claim less than the model, never more), and lookups while a writer applies a stream (each block is
 * read as it was at some moment of the lookup: the answer lies between what was held throughout and what was held
 * at some point). Arbitrary histories are read block by block (the walk, or workers marked open); histories of an
 * engine that evicts children first also under the jump search, on workers left unmarked. Failures print the seed
 * and step.
 */
@Timeout(60)
class EventStreamDifferentialTest {

  private static final String MODEL = "m";
  private static final int BS = 4;
  private static final int DOCS = 6;
  private static final int LEN = 12;
  private static final String[] SALTS = {null, "kvr1:tenant-a"};

  /** Token blocks of the documents (sharing prefixes) and our hashes of them per tenant: [tenant][doc][block]. */
  private final int[][] tokens = new int[DOCS][];
  private final long[][][] ours = new long[SALTS.length][DOCS][];

  private void documents(SplittableRandom r) {
    for (int d = 0; d < DOCS; d++) {
      int shared = d == 0 ? 0 : r.nextInt(LEN);
      int[] from = tokens[r.nextInt(Math.max(1, d))];
      tokens[d] = new int[LEN * BS];
      for (int t = 0; t < LEN * BS; t++) {
        tokens[d][t] = d > 0 && t < shared * BS ? from[t] : r.nextInt(50_000);
      }
      for (int s = 0; s < SALTS.length; s++) {
        ours[s][d] = BlockHasher.hashFullBlocks(new CacheNamespace(MODEL, null, SALTS[s]).rootSeed(), tokens[d],
            tokens[d].length, BS);
      }
    }
  }

  /** The engine's hash: chained like ours, plus what ours ignores (the variant: LoRA int id, hash seed). */
  private long engine(int salt, int doc, int block, int variant) {
    long z = ours[salt][doc][block] + variant * 0x9E3779B97F4A7C15L;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }

  /** One planned event: its batch for the index, its effect on the model. */
  private record Op(WorkerId w, KvEvent event, Runnable onModel) {}

  /** Per worker, per engine hash: our hash and copies per tier. */
  private static final class Model {
    final Map<WorkerId, Map<Long, long[]>> blocks = new HashMap<>();
    /** The engine hash each stored engine hash was chained to (absent: a chain's first). */
    final Map<Long, Long> parents = new HashMap<>();
    int unknownParents;

    Map<Long, long[]> of(WorkerId w) {
      return blocks.computeIfAbsent(w, k -> new HashMap<>());
    }

    void store(WorkerId w, Long parent, long[] engine, long[] our, Tier tier) {
      Map<Long, long[]> m = of(w);
      if (parent != null && !m.containsKey(parent)) {
        unknownParents++;
        return;
      }
      for (int i = 0; i < engine.length; i++) {
        Long p = i == 0 ? parent : Long.valueOf(engine[i - 1]);
        if (p != null) {
          parents.put(engine[i], p);
        }
        m.computeIfAbsent(engine[i], k -> new long[4])[0] = our[i];
        m.get(engine[i])[1 + tier.ordinal()]++;
      }
    }

    void storeTokenless(WorkerId w, long[] engine, Tier tier) {
      for (long e : engine) {
        long[] b = of(w).get(e);
        if (b != null) {
          b[1 + tier.ordinal()]++;
        }
      }
    }

    void remove(WorkerId w, long[] engine, Tier tier) {
      for (long e : engine) {
        long[] b = of(w).get(e);
        if (b != null && b[1 + tier.ordinal()] > 0 && --b[1 + tier.ordinal()] == 0 && b[1] + b[2] + b[3] == 0) {
          of(w).remove(e);
        }
      }
    }

    /** Engine hashes {@code w} holds that no block it holds is chained to: what a prefix-closed engine evicts. */
    List<Long> leaves(WorkerId w) {
      Set<Long> inner = new HashSet<>();
      for (Long e : of(w).keySet()) {
        Long p = parents.get(e);
        if (p != null) {
          inner.add(p);
        }
      }
      List<Long> out = new ArrayList<>();
      for (Long e : of(w).keySet()) {
        if (!inner.contains(e)) {
          out.add(e);
        }
      }
      out.sort(null);
      return out;
    }

    /** Tiers {@code w} holds {@code our} in (GPU 1, CPU 2, disk 4). */
    int tiers(WorkerId w, long our) {
      int t = 0;
      for (long[] b : of(w).values()) {
        if (b[0] == our) {
          t |= (b[1] > 0 ? 1 : 0) | (b[2] > 0 ? 2 : 0) | (b[3] > 0 ? 4 : 0);
        }
      }
      return t;
    }

    /** {worker: [matched, gpu, cpu, disk]} for the workers holding the first block. */
    Map<WorkerId, List<Integer>> lookup(long[] q, int n) {
      Map<WorkerId, List<Integer>> out = new TreeMap<>();
      for (WorkerId w : blocks.keySet()) {
        int[] c = new int[4];
        while (c[0] < n) {
          int t = tiers(w, q[c[0]]);
          if (t == 0) {
            break;
          }
          c[0]++;
          c[(t & 1) != 0 ? 1 : (t & 2) != 0 ? 2 : 3]++;
        }
        if (c[0] > 0) {
          out.put(w, List.of(c[0], c[1], c[2], c[3]));
        }
      }
      return out;
    }
  }

  private static Map<WorkerId, List<Integer>> answer(KvIndex index, PrefixCursor cursor, PrefixMatches out,
      long[] q, int n) {
    index.lookup(cursor, q, n, out);
    Map<WorkerId, List<Integer>> a = new TreeMap<>();
    for (int i = 0; i < out.size(); i++) {
      if (out.matchedBlocks(i) > 0) {
        a.put(out.worker(i), List.of(out.matchedBlocks(i), out.gpuBlocks(i), out.cpuBlocks(i), out.diskBlocks(i)));
      }
    }
    return a;
  }

  /**
   * A random event for {@code w} (whose current hash seed is {@code seed}) and its model effect: stores of a
   * document's stretch (its parent the engine hash of the block before, or one never stored), duplicates included;
   * offload stores without tokens; removes of 1 to 3 hashes, some of them unknown; {@code AllBlocksCleared}. A
   * {@code closed} engine (vLLM's: it evicts a block after its children) stores on GPU only and removes one leaf.
   */
  private Op event(SplittableRandom r, Model model, WorkerId w, int seed, boolean closed) {
    int salt = r.nextInt(SALTS.length);
    int doc = r.nextInt(DOCS);
    int lora = r.nextInt(3); // 0: none; else an integer id our hash ignores
    int variant = lora + 3 * (r.nextInt(4) == 0 ? r.nextInt(seed + 1) : seed);
    Tier tier = closed || r.nextInt(10) < 7 ? Tier.GPU : r.nextBoolean() ? Tier.CPU : Tier.DISK;
    int op = r.nextInt(100);
    if (closed && op >= 45 && op < 97) {
      List<Long> leaves = model.leaves(w);
      long[] eng = {leaves.isEmpty() || r.nextInt(15) == 0 ? r.nextLong() : leaves.get(r.nextInt(leaves.size()))};
      return new Op(w, BlockRemoved.of(tier.name(), eng), () -> model.remove(w, eng, tier));
    }
    if (op < 45) {
      int start = r.nextInt(4) == 0 ? 0 : r.nextInt(LEN);
      int len = 1 + r.nextInt(Math.min(4, LEN - start));
      long[] eng = new long[len];
      long[] our = new long[len];
      List<List<Object>> keys = new ArrayList<>();
      for (int i = 0; i < len; i++) {
        eng[i] = engine(salt, doc, start + i, variant);
        our[i] = ours[salt][doc][start + i];
        List<Object> k = new ArrayList<>();
        if (lora != 0) {
          k.add((long) lora);
        }
        if (start == 0 && i == 0 && SALTS[salt] != null) {
          k.add(SALTS[salt]);
        }
        keys.add(k.isEmpty() ? null : k);
      }
      Long parent = start == 0 ? null : r.nextInt(20) == 0 ? r.nextLong() : engine(salt, doc, start - 1, variant);
      int[] t = Arrays.copyOfRange(tokens[doc], start * BS, (start + len) * BS);
      BlockStored e = BlockStored.of(eng, parent, t, BS, tier.name()).withExtraKeys(keys);
      return new Op(w, e, () -> model.store(w, parent, eng, our, tier));
    } else if (op < 52) {
      Tier lower = r.nextBoolean() ? Tier.CPU : Tier.DISK;
      int start = r.nextInt(LEN);
      long[] eng = new long[1 + r.nextInt(Math.min(3, LEN - start))];
      for (int i = 0; i < eng.length; i++) {
        eng[i] = engine(salt, doc, start + i, variant);
      }
      BlockStored e = BlockStored.of(eng, null, new int[0], BS, lower.name());
      return new Op(w, e, () -> model.storeTokenless(w, eng, lower));
    } else if (op < 97) {
      long[] eng = new long[1 + r.nextInt(3)];
      for (int i = 0; i < eng.length; i++) {
        eng[i] = r.nextInt(15) == 0 ? r.nextLong() : engine(salt, doc, r.nextInt(LEN), variant);
      }
      return new Op(w, BlockRemoved.of(tier.name(), eng), () -> model.remove(w, eng, tier));
    }
    return new Op(w, AllBlocksCleared.INSTANCE, () -> model.of(w).clear());
  }

  /** The serial lane: every event applied to both, lookups and sizes compared after each. */
  private void runSerial(long seed, int steps, int maxEntries, boolean closed) {
    SplittableRandom r = new SplittableRandom(seed);
    documents(r);
    boolean bounded = maxEntries > 0;
    IndexConfig cfg = IndexConfig.defaults().withSegments(1 << r.nextInt(4))
        .withMaxEntries(bounded ? maxEntries : 1_000_000, bounded ? 8 : 1_000_000);
    boolean walk = !closed && r.nextBoolean(); // else the jump search: on workers marked open unless closed
    KvIndex index = new KvIndex(walk ? cfg.withPrefixJump(0) : cfg, Clock.systemUTC());
    EventPlaneHealth health = new EventPlaneHealth(new SimpleMeterRegistry(), Clock.systemUTC(), Duration.ZERO);
    Model model = new Model();
    WorkerId[] ws = new WorkerId[2 + r.nextInt(4)];
    for (int i = 0; i < ws.length; i++) {
      ws[i] = new WorkerId("w" + i, r.nextInt(2));
    }
    Map<WorkerId, EventApplier> appliers = new HashMap<>();
    int[] seeds = new int[ws.length];
    PrefixCursor cursor = index.newCursor();
    PrefixMatches out = new PrefixMatches();
    for (int step = 0; step < steps; step++) {
      int wi = r.nextInt(ws.length);
      WorkerId w = ws[wi];
      String at = "seed " + seed + " step " + step + " (" + w + ")";
      int what = r.nextInt(100);
      int sizeBefore = index.view(w) == null ? 0 : index.view(w).size();
      if (what < 2) {
        index.remove(w); // the worker leaves; it may come back with a fresh view (and maybe another's ordinal)
        health.unregister(w);
        appliers.remove(w);
        model.blocks.remove(w);
      } else if (what < 4) {
        seeds[wi]++; // the engine restarted with another hash seed and no event said so
      } else {
        EventApplier a = appliers.computeIfAbsent(w, k -> {
          WorkerView v = index.register(k);
          if (!walk && !closed) {
            v.markNotPrefixClosed("test: arbitrary eviction order");
          }
          return new EventApplier(v, MODEL, BS, health.register(v));
        });
        int before = model.unknownParents;
        List<KvEvent> batch = new ArrayList<>(); // a batch of 1 to 4 events, as an engine step publishes
        for (int k = 1 + r.nextInt(4); k > 0; k--) {
          Op op = event(r, model, w, seeds[wi], closed);
          op.onModel().run();
          batch.add(op.event());
        }
        int dropped = a.apply(new EventBatch(step, batch, w.dpRank(), 0));
        if (!bounded) {
          assertThat(dropped).as(at + " stores dropped for an unknown parent: " + batch)
              .isEqualTo(model.unknownParents - before);
          assertThat(a.view().size()).as(at + " handles after " + batch).isEqualTo(model.of(w).size());
        }
      }
      int checks = step % 50 == 0 ? SALTS.length * DOCS : 3;
      for (int k = 0; k < checks; k++) {
        long[] q = checks == 3 ? ours[r.nextInt(SALTS.length)][r.nextInt(DOCS)] : ours[k / DOCS][k % DOCS];
        int n = r.nextInt(LEN + 1);
        Map<WorkerId, List<Integer>> got = answer(index, cursor, out, q, n);
        Map<WorkerId, List<Integer>> want = model.lookup(q, n);
        if (!bounded || index.evictions() == 0) {
          assertThat(got).as(at + " lookup of %d blocks", n).isEqualTo(want);
        } else {
          // evictions only forget: every worker answered holds at least as much in the model
          for (Map.Entry<WorkerId, List<Integer>> e : got.entrySet()) {
            assertThat(e.getValue().get(0)).as(at + " evicting %s", e.getKey())
                .isLessThanOrEqualTo(want.getOrDefault(e.getKey(), List.of(0)).get(0));
          }
        }
      }
      if (closed && index.view(w) != null) {
        assertThat(index.view(w).open()).as(at + " a closed engine's view is jumped over").isFalse();
      }
      if (bounded && index.view(w) != null) {
        // a share shrinks when workers join; the worker evicts down to it on its own stores, never grows past it
        long share = Math.max(8, maxEntries / index.workers().size());
        int size = index.view(w).size();
        assertThat(size).as(at + " within its share %d or shrinking", share)
            .isLessThanOrEqualTo((int) Math.max(share, sizeBefore));
      }
    }
  }

  @Test
  void eventStreamsMatchTheModel() {
    for (long seed = 1; seed <= 24; seed++) {
      runSerial(seed, 2500, 0, false);
    }
  }

  /** Unmarked workers whose engine evicts children first: the jump search skips their blocks and must agree. */
  @Test
  void aPrefixClosedEngineMatchesTheModelUnderTheJumpSearch() {
    for (long seed = 1; seed <= 12; seed++) {
      runSerial(seed, 2500, 0, true);
    }
  }

  /** Bounded: a worker beyond its share evicts its own entries, so it may claim less than it holds, never more. */
  @Test
  void atItsBoundTheIndexClaimsNoMoreThanTheModel() {
    for (long seed = 1; seed <= 12; seed++) {
      runSerial(seed, 2500, 40, false);
    }
  }

  /**
   * One writer per worker applies a planned stream while readers look up. A lookup notes each writer's progress
   * before and after; the event in flight may be partly applied. Every block is read as it was at some moment in
   * that window, so the match lies between the longest prefix held in every state of the window and the longest
   * prefix held in some state of it (the precise guarantee: per block, not one state of the whole index).
   */
  @Test
  void concurrentLookupsSeeEachBlockAsItWasDuringTheLookup() throws Exception {
    runConcurrent(5, false);
  }

  /** The same with the jump search on workers whose engine evicts children first. */
  @Test
  void concurrentJumpingLookupsOfAPrefixClosedEngineSeeEachBlockAsItWas() throws Exception {
    runConcurrent(6, true);
  }

  private void runConcurrent(long seed, boolean closed) throws Exception {
    SplittableRandom r = new SplittableRandom(seed);
    documents(r);
    IndexConfig cfg = IndexConfig.defaults().withSegments(2);
    KvIndex index = new KvIndex(closed ? cfg : cfg.withPrefixJump(0), Clock.systemUTC());
    EventPlaneHealth health = new EventPlaneHealth(new SimpleMeterRegistry(), Clock.systemUTC(), Duration.ZERO);
    int writers = 2;
    int events = 3000;
    WorkerId[] ws = new WorkerId[writers];
    EventApplier[] appliers = new EventApplier[writers];
    // held[w][k][salt][doc]: bit i set if block i is held after the worker's first k events
    long[][][][] held = new long[writers][events + 1][SALTS.length][DOCS];
    List<List<Op>> plans = new ArrayList<>();
    for (int w = 0; w < writers; w++) {
      ws[w] = WorkerId.of("c" + w);
      WorkerView v = index.register(ws[w]);
      appliers[w] = new EventApplier(v, MODEL, BS, health.register(v));
      Model model = new Model();
      List<Op> plan = new ArrayList<>();
      for (int k = 0; k <= events; k++) {
        Set<Long> now = new HashSet<>();
        model.of(ws[w]).values().forEach(c -> now.add(c[0])); // an engine hash is in the model while it has copies
        for (int s = 0; s < SALTS.length; s++) {
          for (int d = 0; d < DOCS; d++) {
            for (int i = 0; i < LEN; i++) {
              held[w][k][s][d] |= now.contains(ours[s][d][i]) ? 1L << i : 0;
            }
          }
        }
        if (k < events) {
          WorkerId id = ws[w];
          // now and then the worker leaves and comes back (null event), maybe with the other's ordinal
          Op op = r.nextInt(150) == 0 ? new Op(id, null, () -> model.of(id).clear())
              : event(r, model, id, r.nextInt(30) == 0 ? 1 : 0, closed);
          op.onModel().run();
          plan.add(op);
        }
      }
      plans.add(plan);
    }
    AtomicInteger[] done = new AtomicInteger[writers];
    AtomicReference<Throwable> failure = new AtomicReference<>();
    List<Thread> threads = new ArrayList<>();
    for (int w = 0; w < writers; w++) {
      int ww = w;
      done[w] = new AtomicInteger();
      threads.add(new Thread(() -> {
        for (Op op : plans.get(ww)) {
          if (op.event() == null) {
            index.remove(ws[ww]); // on the worker's writer thread, as the subscriber does
            health.unregister(ws[ww]);
            WorkerView v = index.register(ws[ww]);
            appliers[ww] = new EventApplier(v, MODEL, BS, health.register(v));
          } else {
            appliers[ww].apply(new EventBatch(0, List.of(op.event()), 0, 0));
          }
          done[ww].incrementAndGet();
          Thread.onSpinWait();
        }
      }, "writer-" + w));
    }
    for (int t = 0; t < 2; t++) {
      long readerSeed = seed * 100 + t;
      threads.add(new Thread(() -> {
        SplittableRandom rr = new SplittableRandom(readerSeed);
        PrefixCursor cursor = index.newCursor();
        PrefixMatches out = new PrefixMatches();
        long deadline = System.nanoTime() + 15_000_000_000L;
        try {
          for (int k = 0; k < 200_000 && done[0].get() + done[1].get() < 2 * events; k++) {
            if (System.nanoTime() > deadline) {
              throw new AssertionError("writers did not finish in time");
            }
            int s = rr.nextInt(SALTS.length);
            int d = rr.nextInt(DOCS);
            int n = 1 + rr.nextInt(LEN);
            int[] from = new int[writers];
            for (int w = 0; w < writers; w++) {
              from[w] = done[w].get();
            }
            index.lookup(cursor, ours[s][d], n, out);
            for (int w = 0; w < writers; w++) {
              int to = Math.min(events, done[w].get() + 1);
              long always = -1L;
              long ever = 0;
              for (int j = from[w]; j <= to; j++) {
                always &= held[w][j][s][d];
                ever |= held[w][j][s][d];
              }
              int i = out.indexOf(ws[w]);
              int seen = i < 0 ? 0 : out.matchedBlocks(i);
              assertThat(seen).as("reader seed %d, %s, events %d to %d", readerSeed, ws[w], from[w], to)
                  .isBetween(Math.min(n, Long.numberOfTrailingZeros(~always)),
                      Math.min(n, Long.numberOfTrailingZeros(~ever)));
            }
          }
        } catch (Throwable e) {
          failure.compareAndSet(null, e);
        }
      }, "reader-" + t));
    }
    threads.forEach(Thread::start);
    for (Thread t : threads) {
      t.join(30_000);
      assertThat(t.isAlive()).as("%s ended", t.getName()).isFalse();
    }
    if (failure.get() != null) {
      throw new AssertionError("seed " + seed, failure.get());
    }
    for (int w = 0; w < writers; w++) {
      assertThat(done[w].get()).isEqualTo(events);
      if (closed) {
        assertThat(index.view(ws[w]).open()).as("%s was jumped over", ws[w]).isFalse();
      }
    }
  }
}
