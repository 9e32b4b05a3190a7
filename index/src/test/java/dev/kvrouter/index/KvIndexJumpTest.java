package dev.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The lookup's jump search ({@link IndexConfig#prefixJump}) against {@link ReferenceIndex}, which reads every
 * block: on histories that keep every worker's blocks prefix-closed (stores head first, removes of leaves only,
 * as vLLM evicts) plus every event the index can see break closure (CPU/disk tiers, stale views with holes,
 * our own eviction, predictions), the answers must be identical. Some workers behave like an engine that evicts in
 * any order and are marked not prefix-closed; they must get exact answers too, and no other worker may be marked
 * by the sampled parent check (no false evidence). The limit is pinned down too: a parent removed before its child
 * is a hole the jump search cannot see until the sampled check (one block in {@value WorkerView#LINK_SAMPLE})
 * catches the engine doing it.
 */
@Timeout(120)
class KvIndexJumpTest {

  private static final Duration SHORT_TTL = Duration.ofMillis(500);
  private static final Duration LONG_TTL = Duration.ofMillis(3000);

  @Test
  void jumpSearchMatchesTheModelOnPrefixClosedHistories() {
    for (long seed = 1; seed <= 16; seed++) {
      run(seed, 2500);
    }
  }

  private void run(long seed, int steps) {
    SplittableRandom r = new SplittableRandom(seed);
    TestClock clock = new TestClock();
    int jump = new int[] {2, 3, 4, 8, 16}[r.nextInt(5)];
    KvIndex index = new KvIndex(KvIndexDifferentialTest.config(1 << r.nextInt(4)).withPrefixJump(jump), clock);
    ReferenceIndex ref = new ReferenceIndex();
    WorkerId[] workers = new WorkerId[2 + r.nextInt(70)]; // up to 71: more than one ordinal word
    for (int i = 0; i < workers.length; i++) {
      workers[i] = new WorkerId("w" + i, r.nextInt(2));
    }
    boolean[] unruly = new boolean[workers.length];
    for (int i = 0; i < workers.length; i++) {
      unruly[i] = r.nextInt(6) == 0;
    }
    long[][] docs = KvIndexDifferentialTest.documents(r, 8, 16 + r.nextInt(48));
    PrefixCursor cursor = index.newCursor();
    PrefixMatches out = new PrefixMatches();
    for (int step = 0; step < steps; step++) {
      int wi = r.nextInt(Math.min(workers.length, 8 + step / 40));
      WorkerId w = workers[wi];
      long[] doc = docs[r.nextInt(docs.length)];
      String at = "seed " + seed + " jump " + jump + " step " + step;
      int op = r.nextInt(100);
      if (op < 40) {
        // an engine stores a request's blocks head first (each one's parent is held when it arrives)
        int len = 1 + r.nextInt(doc.length);
        Tier tier = r.nextInt(20) == 0 ? Tier.CPU : Tier.GPU;
        WorkerView v = index.register(w);
        if (unruly[wi]) {
          v.markNotPrefixClosed("test: evicts in any order");
        }
        ref.register(w);
        for (int i = 0; i < len; i++) {
          long e = KvIndexDifferentialTest.engineHash(w, doc[i]);
          if (i == 0) {
            v.store(e, doc[i], tier);
          } else {
            v.store(e, doc[i], tier, doc[i - 1]); // as the event applier stores, so the sampled check runs
          }
          ref.store(w, e, doc[i], tier);
        }
      } else if (op < 75) {
        // evicts a leaf: a held block none of whose children (in any document) is held; unruly workers any block
        int i = r.nextInt(doc.length);
        WorkerView v = index.view(w);
        if (v != null && ref.holds(w, doc[i]) && (unruly[wi] || isLeaf(ref, w, docs, doc, i))) {
          long e = KvIndexDifferentialTest.engineHash(w, doc[i]);
          v.remove(e, Tier.GPU);
          ref.remove(w, e, Tier.GPU);
        }
      } else if (op < 78) {
        // lost events: the view goes stale, then may lose any block (a hole); it stays stale until cleared
        WorkerView v = index.view(w);
        if (v != null) {
          v.setStale(true);
          ref.setStale(w, true);
          int i = r.nextInt(doc.length);
          long e = KvIndexDifferentialTest.engineHash(w, doc[i]);
          v.remove(e, Tier.GPU);
          ref.remove(w, e, Tier.GPU);
        }
      } else if (op < 81) {
        WorkerView v = index.view(w);
        if (v != null) {
          v.clear();
          ref.clear(w);
          v.setStale(false);
          ref.setStale(w, false);
        }
      } else if (op < 86) {
        int n = 1 + r.nextInt(doc.length);
        index.predict(w, doc, n);
        ref.predict(w, doc, n, clock.millis(), SHORT_TTL.toMillis(), LONG_TTL.toMillis());
      } else if (op < 90) {
        clock.advance(r.nextInt(400));
        index.maintain();
        ref.expire(clock.millis());
      } else if (op < 92) {
        index.remove(w);
        ref.remove(w);
      }
      int checks = step % 100 == 0 ? docs.length : 3;
      for (int k = 0; k < checks; k++) {
        long[] q = docs[checks == docs.length ? k : r.nextInt(docs.length)];
        int n = r.nextInt(q.length + 1);
        KvIndexDifferentialTest.assertLookupMatchesModel(index, cursor, out, ref, q, n, at);
      }
    }
    for (int i = 0; i < workers.length; i++) {
      WorkerView v = index.view(workers[i]);
      if (v != null && !unruly[i]) {
        assertThat(v.notPrefixClosed()).as("seed %d: %s evicts leaves only", seed, workers[i]).isNull();
      }
    }
  }

  /**
   * Candidates spread over two to four ordinal words (65 to 250 workers), so a lookup reads block by block until at
   * most {@link PrefixCursor#FAST_WORDS} words still match, then settles each word on its own (walk or jump
   * search): every answer must equal the model's, whichever word its worker is in.
   */
  @Test
  void workersInSeveralOrdinalWordsMatchTheModel() {
    for (long seed = 1; seed <= 24; seed++) {
      SplittableRandom r = new SplittableRandom(seed);
      int jump = new int[] {0, 4, 16}[(int) (seed % 3)];
      TestClock clock = new TestClock();
      KvIndex index = new KvIndex(KvIndexDifferentialTest.config(1 << r.nextInt(4)).withPrefixJump(jump), clock);
      ReferenceIndex ref = new ReferenceIndex();
      long[][] docs = KvIndexDifferentialTest.documents(r, 3, 40 + r.nextInt(60));
      int workers = 65 + r.nextInt(186);
      // a few words hold nobody, so the words still matching are not always adjacent
      int skipWord = r.nextInt(4);
      for (int i = 0; i < workers; i++) {
        WorkerId w = new WorkerId("w" + i, 0);
        WorkerView v = index.register(w);
        ref.register(w);
        if ((i >>> 6) == skipWord && r.nextInt(4) != 0) {
          continue;
        }
        long[] doc = docs[r.nextInt(docs.length)];
        int len = r.nextInt(doc.length + 1);
        Tier tier = r.nextInt(30) == 0 ? Tier.CPU : Tier.GPU;
        for (int b = 0; b < len; b++) {
          long e = KvIndexDifferentialTest.engineHash(w, doc[b]);
          v.store(e, doc[b], tier);
          ref.store(w, e, doc[b], tier);
        }
        if (r.nextInt(8) == 0) {
          int n = 1 + r.nextInt(doc.length);
          index.predict(w, doc, n);
          ref.predict(w, doc, n, clock.millis(), SHORT_TTL.toMillis(), LONG_TTL.toMillis());
        }
      }
      index.maintain();
      PrefixCursor cursor = index.newCursor();
      PrefixMatches out = new PrefixMatches();
      for (long[] q : docs) {
        for (int n : new int[] {q.length, q.length - 1, 1 + r.nextInt(q.length), 17 + r.nextInt(q.length - 17)}) {
          String at = "seed " + seed + " jump " + jump + " workers " + workers;
          KvIndexDifferentialTest.assertLookupMatchesModel(index, cursor, out, ref, q, n, at);
        }
      }
    }
  }

  /** Whether no held block of {@code w} has {@code doc[i]} as its parent (documents share prefixes). */
  private static boolean isLeaf(ReferenceIndex ref, WorkerId w, long[][] docs, long[] doc, int i) {
    for (long[] d : docs) {
      if (i + 1 < d.length && d[i] == doc[i] && ref.holds(w, d[i + 1])) {
        return false;
      }
    }
    return true;
  }

  @Test
  void workersWithHolesTheIndexCanSeeAreReadBlockByBlock() {
    long[] doc = KvIndexDifferentialTest.documents(new SplittableRandom(3), 1, 64)[0];
    KvIndex index = new KvIndex(KvIndexDifferentialTest.config(4).withPrefixJump(16), new TestClock());
    WorkerId a = WorkerId.of("a");
    WorkerView v = index.register(a);
    for (int i = 0; i < 64; i++) {
      v.store(i + 1, doc[i], Tier.GPU);
    }
    assertThat(matched(index.lookup(doc, 64), a)).isEqualTo(64);
    // a lost event: the view is stale, and block 20 is gone although 21.. are held
    v.setStale(true);
    v.remove(21, Tier.GPU);
    assertThat(v.open()).isTrue();
    assertThat(matched(index.lookup(doc, 64), a)).isEqualTo(20);
    // CPU blocks: tier counts need every block, and the offload tier evicts in its own order
    WorkerId b = WorkerId.of("b");
    WorkerView vb = index.register(b);
    for (int i = 0; i < 64; i++) {
      vb.store(i + 1, doc[i], i < 32 ? Tier.GPU : Tier.CPU);
    }
    vb.remove(11, Tier.GPU);
    assertThat(vb.open()).isTrue();
    PrefixMatches m = index.lookup(doc, 64);
    assertThat(matched(m, b)).isEqualTo(10);
    // clearing the view closes it again
    v.clear();
    v.setStale(false);
    assertThat(v.open()).isFalse();
  }

  /**
   * Predictions under a tight bound are evicted one block at a time; tail first, what is left of each is a prefix,
   * so the jump search must answer as the walk does (same operations on two indexes, only the lookup differs).
   */
  @Test
  void predictionsStayPrefixClosedUnderTheirBound() {
    SplittableRandom r = new SplittableRandom(11);
    long[][] docs = KvIndexDifferentialTest.documents(r, 6, 48);
    TestClock clock = new TestClock();
    IndexConfig base = KvIndexDifferentialTest.config(4).withPredictions(SHORT_TTL, LONG_TTL, 100, 1 << 12);
    KvIndex walk = new KvIndex(base.withPrefixJump(0), clock);
    KvIndex jump = new KvIndex(base.withPrefixJump(8), clock);
    PrefixCursor cw = walk.newCursor();
    PrefixCursor cj = jump.newCursor();
    PrefixMatches ow = new PrefixMatches();
    PrefixMatches oj = new PrefixMatches();
    for (int step = 0; step < 3000; step++) {
      WorkerId w = WorkerId.of("w" + r.nextInt(10));
      long[] doc = docs[r.nextInt(docs.length)];
      int n = 1 + r.nextInt(doc.length);
      walk.predict(w, doc, n);
      jump.predict(w, doc, n);
      if (r.nextInt(20) == 0) {
        clock.advance(r.nextInt(300));
        walk.maintain();
        jump.maintain();
      }
      for (long[] q : docs) {
        walk.lookup(cw, q, q.length, ow);
        jump.lookup(cj, q, q.length, oj);
        assertThat(ReferenceIndex.of(oj)).as("step " + step).isEqualTo(ReferenceIndex.of(ow));
      }
    }
  }

  /** A worker beyond its share loses blocks to our own sweeping hand, parents included: it is walked. */
  @Test
  void aWorkerEvictedHereIsReadBlockByBlock() {
    long[] doc = KvIndexDifferentialTest.documents(new SplittableRandom(7), 1, 200)[0];
    IndexConfig small = KvIndexDifferentialTest.config(4).withMaxEntries(128, 128);
    KvIndex walk = new KvIndex(small.withPrefixJump(0), new TestClock());
    KvIndex jump = new KvIndex(small.withPrefixJump(16), new TestClock());
    WorkerId a = WorkerId.of("a");
    for (KvIndex index : new KvIndex[] {walk, jump}) {
      WorkerView v = index.register(a);
      assertThat(v.open()).isFalse();
      for (int i = 0; i < doc.length; i++) {
        v.store(i + 1, doc[i], Tier.GPU);
      }
      assertThat(index.evictions()).isPositive();
      assertThat(v.open()).isTrue();
    }
    assertThat(ReferenceIndex.of(jump.lookup(doc, doc.length)))
        .isEqualTo(ReferenceIndex.of(walk.lookup(doc, doc.length)));
  }

  /**
   * One engine event removing several blocks (SGLang evicts a radix node's pages in one event, listed head first):
   * midway the view holds children of removed parents, so from before its first removal to after its last the
   * worker is read block by block. Deterministic: a lookup between two of the event's removals stands for one on
   * the router's threads.
   */
  @Test
  void aMultiBlockRemovalIsReadBlockByBlockUntilItsLastBlockIsGone() {
    long[] doc = KvIndexDifferentialTest.documents(new SplittableRandom(11), 1, 64)[0];
    KvIndex index = new KvIndex(KvIndexDifferentialTest.config(4), new TestClock());
    WorkerId a = WorkerId.of("a");
    WorkerView v = index.register(a);
    long[] engine = new long[doc.length];
    for (int i = 0; i < doc.length; i++) {
      engine[i] = 1000 + i;
      if (i == 0) {
        v.store(engine[i], doc[i], Tier.GPU);
      } else {
        v.store(engine[i], doc[i], Tier.GPU, doc[i - 1]);
      }
    }
    assertThat(matched(index.lookup(doc, doc.length), a)).isEqualTo(64);
    v.removingTogether(engine, 1, 63); // blocks 1 to 63, head first
    assertThat(v.open()).isTrue();
    v.remove(engine[1], Tier.GPU);
    assertThat(matched(index.lookup(doc, doc.length), a)).as("block 1 is gone").isEqualTo(1);
    for (int i = 2; i < doc.length; i++) {
      v.remove(engine[i], Tier.GPU);
    }
    v.removedTogether();
    assertThat(v.open()).as("what is left is closed again").isFalse();
    assertThat(v.notPrefixClosed()).isNull();
    assertThat(matched(index.lookup(doc, doc.length), a)).isEqualTo(1);
  }

  private static int matched(PrefixMatches m, WorkerId w) {
    int i = m.indexOf(w);
    assertThat(i).as("%s in %s", w, m).isGreaterThanOrEqualTo(0);
    return m.matchedBlocks(i);
  }

  /**
   * An engine that frees a chain from the front (a sliding-window group's blocks, with no group information to drop
   * them by): the sampled check catches it at the first sampled block removed after its parent, and from then on
   * the worker is walked, so every answer equals the walk's, holes and all.
   */
  @Test
  void anEngineThatEvictsParentsFirstIsCaughtAndWalkedFromThen() {
    SplittableRandom r = new SplittableRandom(9);
    long[][] docs = new long[8][128];
    for (long[] d : docs) {
      for (int i = 0; i < d.length; i++) {
        d[i] = r.nextLong();
      }
    }
    WorkerId a = WorkerId.of("a");
    KvIndex walk = new KvIndex(KvIndexDifferentialTest.config(4).withPrefixJump(0), new TestClock());
    KvIndex jump = new KvIndex(KvIndexDifferentialTest.config(4), new TestClock()); // the default: jump search
    WorkerView vw = walk.register(a);
    WorkerView vj = jump.register(a);
    for (int c = 0; c < docs.length; c++) {
      for (int i = 0; i < docs[c].length; i++) {
        long e = c * 1000L + i + 1;
        for (WorkerView v : new WorkerView[] {vw, vj}) {
          if (i == 0) {
            v.store(e, docs[c][i], Tier.GPU);
          } else {
            v.store(e, docs[c][i], Tier.GPU, docs[c][i - 1]);
          }
        }
      }
    }
    assertThat(vj.open()).isFalse();
    int removes = 0;
    int caughtAfter = -1;
    for (int c = 0; c < docs.length; c++) {
      for (int i = 0; i < docs[c].length - 8; i++) { // front first; the last 8 blocks stay (the window)
        long e = c * 1000L + i + 1;
        vw.remove(e, Tier.GPU);
        vj.remove(e, Tier.GPU);
        removes++;
        if (caughtAfter < 0 && vj.notPrefixClosed() != null) {
          caughtAfter = removes;
        }
        if (caughtAfter >= 0) {
          assertThat(vj.open()).isTrue();
          for (long[] q : docs) {
            assertThat(ReferenceIndex.of(jump.lookup(q, q.length))).as("after %d removes", removes)
                .isEqualTo(ReferenceIndex.of(walk.lookup(q, q.length)));
          }
        }
      }
    }
    // expected within about LINK_SAMPLE removes of a chain's second block; this seed: well inside the first chain
    assertThat(caughtAfter).isBetween(1, 120);
    assertThat(vj.notPrefixClosed()).contains("removed a block before one of its children");
    assertThat(vj.holesSeen()).isPositive();
    // the evidence is the engine's, so it outlives the engine clearing its cache
    vj.reset();
    assertThat(vj.open()).isTrue();
  }

  /** Tail first (as vLLM frees a request's blocks) never looks like evidence, however many chains turn over. */
  @Test
  void tailFirstEvictionIsNeverTakenForEvidence() {
    SplittableRandom r = new SplittableRandom(10);
    KvIndex index = new KvIndex(KvIndexDifferentialTest.config(4), new TestClock());
    WorkerView v = index.register(WorkerId.of("a"));
    long e = 1;
    for (int round = 0; round < 40; round++) {
      long[] d = new long[64 + r.nextInt(64)];
      long[] engine = new long[d.length];
      for (int i = 0; i < d.length; i++) {
        d[i] = r.nextLong();
        engine[i] = e++;
        if (i == 0) {
          v.store(engine[i], d[i], Tier.GPU);
        } else {
          v.store(engine[i], d[i], Tier.GPU, d[i - 1]);
        }
      }
      for (int i = d.length - 1; i >= 0; i--) {
        v.remove(engine[i], Tier.GPU);
      }
    }
    assertThat(v.notPrefixClosed()).isNull();
    assertThat(v.holesSeen()).isZero();
    assertThat(v.open()).isFalse();
  }

  /** Before the sampled check has seen a sampled block leave after its parent, a hole goes unseen. */
  @Test
  void aParentRemovedBeforeItsChildUnseenIsTheJumpSearchsBlindSpot() {
    long[] doc = KvIndexDifferentialTest.documents(new SplittableRandom(5), 1, 64)[0];
    WorkerId a = WorkerId.of("a");
    KvIndex walk = new KvIndex(KvIndexDifferentialTest.config(4).withPrefixJump(0), new TestClock());
    KvIndex jump = new KvIndex(KvIndexDifferentialTest.config(4).withPrefixJump(16), new TestClock());
    for (KvIndex index : new KvIndex[] {walk, jump}) {
      WorkerView v = index.register(a);
      for (int i = 0; i < 64; i++) {
        v.store(i + 1, doc[i], Tier.GPU);
      }
      v.remove(6, Tier.GPU); // block 5, with 6..63 still held: no engine we follow evicts like this
    }
    assertThat(matched(walk.lookup(doc, 64), a)).isEqualTo(5);
    assertThat(matched(jump.lookup(doc, 64), a)).isEqualTo(64); // anchors 15, 31, 47, 63 are all held
  }
}
