package dev.kvrouter.extproc.load;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.WorkerId;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.random.RandomGenerator;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

/**
 * The ledger returns to zero after any mix of completions, cancellations, resets, expiries, scrapes and fleet
 * changes; and at every step it agrees with a plain model (a multiset of block hashes per worker).
 */
class LoadLedgerPropertiesTest {

  static final WorkerId[] WORKERS = {WorkerId.of("w0"), WorkerId.of("w1"), new WorkerId("w2", 1)};

  /** One step of a request's life or of the ledger's owner. */
  sealed interface Op permits Reserve, FirstByte, End, Advance, Sweep, Scrape, Retain {}

  /** A request on worker {@code w}: a shared prefix of {@code shared} blocks of family {@code family}, then own. */
  record Reserve(int w, int family, int shared, int own, int unique, int prefill) implements Op {}

  record FirstByte(int which) implements Op {}

  /** Completion, cancel or reset: all release through the same call; {@code twice} releases again. */
  record End(int which, boolean twice) implements Op {}

  record Advance(int seconds) implements Op {}

  record Sweep() implements Op {}

  record Scrape(int w) implements Op {}

  record Retain(int keepMask) implements Op {}

  @Provide
  Arbitrary<List<Op>> ops() {
    Arbitrary<Op> reserve = Combinators.combine(Arbitraries.integers().between(0, 2),
        Arbitraries.integers().between(0, 2), Arbitraries.integers().between(0, 6), Arbitraries.integers().between(0, 4),
        Arbitraries.integers().between(0, 5), Arbitraries.integers().between(0, 4000))
        .as((w, f, s, o, u, p) -> (Op) new Reserve(w, f, s, o, u, p));
    Arbitrary<Op> first = Arbitraries.integers().between(0, 40).map(FirstByte::new);
    Arbitrary<Op> end = Combinators.combine(Arbitraries.integers().between(0, 40), Arbitraries.of(true, false))
        .as(End::new);
    Arbitrary<Op> advance = Arbitraries.integers().between(1, 200).map(Advance::new);
    Arbitrary<Op> sweep = Arbitraries.just(new Sweep());
    Arbitrary<Op> scrape = Arbitraries.integers().between(0, 2).map(Scrape::new);
    Arbitrary<Op> retain = Arbitraries.integers().between(0, 7).map(Retain::new);
    return Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(6, reserve), net.jqwik.api.Tuple.of(3, first), net.jqwik.api.Tuple.of(4, end),
        net.jqwik.api.Tuple.of(1, advance), net.jqwik.api.Tuple.of(1, sweep), net.jqwik.api.Tuple.of(1, scrape),
        net.jqwik.api.Tuple.of(1, retain))
        .list().ofMaxSize(120);
  }

  /** Hashes of a request: the family's shared chain, then the request's own blocks. */
  static long[] hashes(int family, int shared, int own, int serial) {
    long[] h = new long[shared + own];
    for (int i = 0; i < shared; i++) {
      h[i] = family * 1000L + i;
    }
    for (int i = 0; i < own; i++) {
      h[shared + i] = 1_000_000L * (serial + 1) + i;
    }
    return h;
  }

  @Property(tries = 300)
  void theLedgerAgreesWithAModelAndReturnsToZero(@ForAll("ops") List<Op> ops) {
    FakeClock clock = new FakeClock();
    LoadLedger ledger = new LoadLedger(clock, TimeUnit.SECONDS.toNanos(300), 10_000);
    List<Reservation> made = new ArrayList<>();
    // model of the live (not yet released) reservations, per ledger identity of the worker
    Map<Reservation, long[]> live = new HashMap<>();
    Map<Reservation, Boolean> prefillHeld = new HashMap<>();
    Map<Reservation, Integer> generation = new HashMap<>();
    int[] gen = new int[WORKERS.length]; // bumped when a worker leaves the fleet: its old reservations detach
    for (Op op : ops) {
      if (op instanceof Reserve r) {
        long[] h = hashes(r.family(), r.shared(), r.own(), made.size());
        Reservation res = ledger.reserve(WORKERS[r.w()], r.prefill(), h, r.unique());
        made.add(res);
        live.put(res, h);
        prefillHeld.put(res, true);
        generation.put(res, gen[r.w()]);
      } else if (op instanceof FirstByte f) {
        if (f.which() < made.size()) {
          Reservation res = made.get(f.which());
          ledger.prefillDone(res);
          if (live.containsKey(res)) {
            prefillHeld.put(res, false);
          }
        }
      } else if (op instanceof End e) {
        if (e.which() < made.size()) {
          Reservation res = made.get(e.which());
          ledger.release(res);
          if (e.twice()) {
            ledger.release(res);
          }
          live.remove(res);
        }
      } else if (op instanceof Advance a) {
        clock.advance(a.seconds(), TimeUnit.SECONDS);
      } else if (op instanceof Sweep) {
        ledger.sweep();
        live.keySet().removeIf(Reservation::released);
      } else if (op instanceof Scrape sc) {
        ledger.scraped(WORKERS[sc.w()]);
      } else if (op instanceof Retain r) {
        List<WorkerId> keep = new ArrayList<>();
        for (int i = 0; i < WORKERS.length; i++) {
          if ((r.keepMask() & (1 << i)) != 0) {
            keep.add(WORKERS[i]);
          } else {
            gen[i]++;
          }
        }
        ledger.retain(Set.copyOf(keep));
      }
      // the model: per worker, the reservations of its current generation
      for (int w = 0; w < WORKERS.length; w++) {
        long prefill = 0;
        long requests = 0;
        Map<Long, Integer> refs = new HashMap<>();
        long unique = 0;
        long context = 0;
        for (Map.Entry<Reservation, long[]> en : live.entrySet()) {
          Reservation res = en.getKey();
          if (!res.worker().equals(WORKERS[w]) || generation.get(res) != gen[w]) {
            continue;
          }
          requests++;
          if (prefillHeld.get(res)) {
            prefill += res.prefillTokens();
          }
          unique += res.blocks() - en.getValue().length;
          context += res.blocks();
          for (long h : en.getValue()) {
            refs.merge(h, 1, Integer::sum);
          }
        }
        LocalLoad l = ledger.local(WORKERS[w]);
        assertThat(l.prefillTokens()).as("prefill of %s after %s", WORKERS[w], op).isEqualTo(prefill);
        assertThat(l.decodeBlocks()).as("blocks of %s after %s", WORKERS[w], op).isEqualTo(refs.size() + unique);
        assertThat(l.contextBlocks()).as("context of %s after %s", WORKERS[w], op).isEqualTo(context);
        assertThat(l.requests()).as("requests of %s after %s", WORKERS[w], op).isEqualTo(requests);
        // net change since the last scrape: never more than is in flight now
        assertThat(l.sincePrefillTokens()).isLessThanOrEqualTo(l.prefillTokens());
        assertThat(l.sinceRequests()).isLessThanOrEqualTo(l.requests());
        // a request reads at least the blocks it holds: context is never below distinct memory
        assertThat(l.contextBlocks()).isGreaterThanOrEqualTo(l.decodeBlocks());
      }
    }
    for (Reservation r : made) {
      if (r.prefillTokens() % 2 == 0) {
        ledger.prefillDone(r);
      }
      ledger.release(r);
    }
    assertThat(ledger.totals()).containsExactly(0, 0, 0, 0, 0);
    assertThat(ledger.liveReservations()).isZero();
  }

  @Test
  void concurrentRequestsCancelsAndExpiryStillReturnToZero() throws Exception {
    FakeClock clock = new FakeClock();
    LoadLedger ledger = new LoadLedger(clock, TimeUnit.MILLISECONDS.toNanos(50), 100_000);
    int threads = 4;
    int perThread = 5_000;
    CountDownLatch start = new CountDownLatch(1);
    AtomicBoolean done = new AtomicBoolean();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    List<Reservation> leftovers = java.util.Collections.synchronizedList(new ArrayList<>());
    List<Thread> ts = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      int seed = t;
      ts.add(new Thread(() -> {
        RandomGenerator rnd = new java.util.SplittableRandom(seed);
        try {
          start.await();
          for (int i = 0; i < perThread; i++) {
            WorkerId w = WORKERS[rnd.nextInt(WORKERS.length)];
            Reservation r = ledger.reserve(w, rnd.nextInt(2000),
                hashes(rnd.nextInt(3), rnd.nextInt(8), rnd.nextInt(3), seed * perThread + i), rnd.nextInt(4));
            switch (rnd.nextInt(4)) {
              case 0 -> { // completes
                ledger.prefillDone(r);
                ledger.release(r);
              }
              case 1 -> ledger.release(r); // cancelled before the first byte
              case 2 -> { // reset racing with a second release
                ledger.prefillDone(r);
                ledger.release(r);
                ledger.release(r);
              }
              default -> leftovers.add(r); // never hears its end: the sweeper or the final cleanup gets it
            }
          }
        } catch (Throwable e) {
          failure.set(e);
        }
      }));
    }
    Thread sweeper = new Thread(() -> {
      while (!done.get()) {
        clock.advance(20, TimeUnit.MILLISECONDS);
        ledger.sweep();
        // release a few leftovers from this thread too, racing the sweep
        synchronized (leftovers) {
          if (!leftovers.isEmpty()) {
            ledger.release(leftovers.get(leftovers.size() - 1));
          }
        }
        Thread.onSpinWait();
      }
    });
    ts.forEach(Thread::start);
    sweeper.start();
    start.countDown();
    for (Thread t : ts) {
      t.join(TimeUnit.SECONDS.toMillis(60));
    }
    done.set(true);
    sweeper.join(TimeUnit.SECONDS.toMillis(10));
    assertThat(failure.get()).isNull();
    synchronized (leftovers) {
      for (Reservation r : leftovers) {
        ledger.release(r);
      }
    }
    assertThat(ledger.totals()).containsExactly(0, 0, 0, 0, 0);
    assertThat(ledger.liveReservations()).isZero();
    for (WorkerId w : WORKERS) {
      assertThat(ledger.local(w)).isEqualTo(new LocalLoad(0, 0, 0, 0, 0, 0, 0));
    }
  }
}
