package dev.kvrouter.extproc.replicas;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.LocalLoad;
import dev.kvrouter.extproc.load.Reservation;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.index.WorkerId;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;

/**
 * Two replicas deciding concurrently and hearing each other late, in any interleaving: once every message has
 * arrived they agree on every worker's last turn (so a tie breaks alike on both), each replica's own turns only
 * rise, and once every request has ended both ledgers are back to zero, copies trimmed on arrival included.
 */
class ReplicaSyncPropertiesTest {

  static final WorkerId[] WORKERS = {WorkerId.of("w0"), WorkerId.of("w1"), new WorkerId("w2", 1)};
  static final int BS = 16;

  sealed interface Op permits Reserve, FirstByte, End, Deliver, Lose {}

  /** Replica {@code rep} sends a prompt of {@code blocks} blocks of family {@code family} to worker {@code w}. */
  record Reserve(int rep, int w, int family, int blocks, int credited) implements Op {}

  record FirstByte(int rep, int which) implements Op {}

  record End(int rep, int which) implements Op {}

  /** Up to {@code n} of replica {@code rep}'s messages reach the other, in order. */
  record Deliver(int rep, int n) implements Op {}

  /** Up to {@code n} of replica {@code rep}'s messages are lost on the way (the link's queue full, a reconnect). */
  record Lose(int rep, int n) implements Op {}

  @Provide
  Arbitrary<List<Op>> ops() {
    return ops(0);
  }

  @Provide
  Arbitrary<List<Op>> lossyOps() {
    return ops(1);
  }

  /** @param lose how often (against 13 for the others) messages are lost on the way */
  static Arbitrary<List<Op>> ops(int lose) {
    Arbitrary<Integer> rep = Arbitraries.integers().between(0, 1);
    Arbitrary<Op> reserve = Combinators.combine(rep, Arbitraries.integers().between(0, 2),
        Arbitraries.integers().between(0, 2), Arbitraries.integers().between(1, 6), Arbitraries.integers().between(0, 6))
        .as((r, w, f, b, c) -> (Op) new Reserve(r, w, f, b, Math.min(c, b)));
    Arbitrary<Op> first = Combinators.combine(rep, Arbitraries.integers().between(0, 20)).as(FirstByte::new);
    Arbitrary<Op> end = Combinators.combine(rep, Arbitraries.integers().between(0, 20)).as(End::new);
    Arbitrary<Op> deliver = Combinators.combine(rep, Arbitraries.integers().between(0, 6)).as(Deliver::new);
    Arbitrary<Op> lost = Combinators.combine(rep, Arbitraries.integers().between(1, 3)).as(Lose::new);
    return lose == 0
        ? Arbitraries.frequencyOf(Tuple.of(4, reserve), Tuple.of(2, first), Tuple.of(3, end), Tuple.of(4, deliver))
            .list().ofMaxSize(80)
        : Arbitraries.frequencyOf(Tuple.of(4, reserve), Tuple.of(2, first), Tuple.of(3, end), Tuple.of(4, deliver),
            Tuple.of(lose, lost)).list().ofMaxSize(80);
  }

  /** A replica: its ledger, its sync, what it sent and not yet delivered, its own requests in flight. */
  static final class Replica {
    final LoadLedger ledger;
    final ReplicaSync sync;
    final Deque<byte[]> outbox = new ArrayDeque<>();
    final List<Reservation> own = new ArrayList<>();
    long lastOwnTurn;

    Replica(long id, AtomicLong now) {
      ledger = new LoadLedger(now::get, TimeUnit.MINUTES.toNanos(5), 1000);
      sync = new ReplicaSync(id, ledger, PrefixOverlapSource.NONE, outbox::add, now::get, TimeUnit.SECONDS.toNanos(30));
      ledger.setListener(sync.ledgerListener());
    }

    void deliver(int n, Replica other) {
      for (int i = 0; i < n && !outbox.isEmpty(); i++) {
        other.sync.apply(outbox.poll());
      }
    }
  }

  static void quiesce(Replica a, Replica b) {
    while (!a.outbox.isEmpty() || !b.outbox.isEmpty()) {
      a.deliver(Integer.MAX_VALUE, b);
      b.deliver(Integer.MAX_VALUE, a);
    }
  }

  static long[] prompt(int family, int blocks) {
    long[] h = new long[blocks];
    for (int i = 0; i < blocks; i++) {
      h[i] = (family + 1) * 1_000L + i; // one chain per family: a longer prompt extends a shorter one
    }
    return h;
  }

  @Property(tries = 300)
  void replicasThatHeardEverythingAgreeOnTurnsAndReturnToZero(@ForAll("ops") List<Op> ops) {
    AtomicLong now = new AtomicLong(1_000_000_000L);
    Replica[] rs = {new Replica(1, now), new Replica(2, now)};
    run(ops, rs);
    quiesce(rs[0], rs[1]);
    endAll(rs);
  }

  /**
   * Messages lost on the way, any of them (a reservation, a release, a first byte, a state's part, a question): the
   * gaps are seen, the states asked for and received within a few heartbeats, and the replicas then agree on turns,
   * and return to zero once every request has ended, no copy left to the ledger's expiry.
   */
  @Property(tries = 300)
  void replicasThatLoseMessagesRecoverWithinAFewHeartbeats(@ForAll("lossyOps") List<Op> ops) {
    AtomicLong now = new AtomicLong(1_000_000_000L);
    Replica[] rs = {new Replica(1, now), new Replica(2, now)};
    run(ops, rs);
    for (int round = 0; round < 3; round++) {
      for (Replica x : rs) {
        x.sync.heartbeat();
      }
      quiesce(rs[0], rs[1]);
      now.addAndGet(ReplicaSync.RESYNC_RETRY_NANOS);
      for (Replica x : rs) {
        x.sync.expireSilent();
      }
      quiesce(rs[0], rs[1]);
    }
    for (Replica x : rs) {
      assertThat(x.sync.peerCount()).isLessThanOrEqualTo(1);
    }
    endAll(rs);
  }

  static void run(List<Op> ops, Replica[] rs) {
    for (Op op : ops) {
      if (op instanceof Reserve r) {
        Replica x = rs[r.rep()];
        long promptTokens = (long) r.blocks() * BS + 5;
        Reservation res = x.ledger.reserve(WORKERS[r.w()], promptTokens - (long) r.credited() * BS,
            prompt(r.family(), r.blocks()), 1, promptTokens, BS);
        assertThat(res.turn()).as("own turns rise").isGreaterThan(x.lastOwnTurn);
        x.lastOwnTurn = res.turn();
        x.own.add(res);
      } else if (op instanceof FirstByte f) {
        Replica x = rs[f.rep()];
        if (!x.own.isEmpty()) {
          x.ledger.prefillDone(x.own.get(f.which() % x.own.size()));
        }
      } else if (op instanceof End e) {
        Replica x = rs[e.rep()];
        if (!x.own.isEmpty()) {
          x.ledger.release(x.own.remove(e.which() % x.own.size()));
        }
      } else if (op instanceof Deliver d) {
        rs[d.rep()].deliver(d.n(), rs[1 - d.rep()]);
      } else if (op instanceof Lose l) {
        for (int i = 0; i < l.n() && !rs[l.rep()].outbox.isEmpty(); i++) {
          rs[l.rep()].outbox.poll();
        }
      }
      for (Replica x : rs) {
        for (WorkerId w : WORKERS) {
          LocalLoad l = x.ledger.local(w);
          assertThat(l.prefillTokens()).as("prefill never negative").isGreaterThanOrEqualTo(0);
          assertThat(l.requests()).isGreaterThanOrEqualTo(0);
        }
      }
    }
  }

  static void endAll(Replica[] rs) {
    assertThat(rs[1].ledger.lastTurns()).as("every worker's last turn, on both").isEqualTo(rs[0].ledger.lastTurns());
    for (Replica x : rs) {
      for (Reservation r : List.copyOf(x.own)) {
        x.ledger.release(r);
      }
    }
    quiesce(rs[0], rs[1]);
    for (Replica x : rs) {
      assertThat(x.ledger.totals()).as("back to zero").containsExactly(0, 0, 0, 0, 0);
      assertThat(x.ledger.liveReservations()).isZero();
      assertThat(x.sync.malformed()).isZero();
    }
  }
}
