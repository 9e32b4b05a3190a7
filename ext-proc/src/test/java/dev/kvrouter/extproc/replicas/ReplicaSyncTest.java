package dev.kvrouter.extproc.replicas;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.LocalLoad;
import dev.kvrouter.extproc.load.Reservation;
import dev.kvrouter.extproc.routing.Overlap;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.index.WorkerId;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class ReplicaSyncTest {

  static final WorkerId W = new WorkerId("w1", 0);
  final AtomicLong now = new AtomicLong(1_000_000_000L);

  /** A replica: its ledger, the predictions its index recorded, and its sync. */
  final class Replica {
    final LoadLedger ledger = new LoadLedger(now::get, TimeUnit.MINUTES.toNanos(5), 1000);
    final List<String> predictions = new ArrayList<>();
    final PrefixOverlapSource index = new PrefixOverlapSource() {
      @Override
      public Lookup lookup(long[] blockHashes) {
        return worker -> Overlap.NONE;
      }

      @Override
      public void recordPrediction(WorkerId worker, long[] blockHashes) {
        predictions.add(worker.name() + ":" + blockHashes.length);
      }
    };
    final List<byte[]> outbox = new ArrayList<>();
    final ReplicaSync sync;

    Replica(long id) {
      sync = new ReplicaSync(id, ledger, index, outbox::add, now::get, TimeUnit.SECONDS.toNanos(3));
      ledger.setListener(sync.ledgerListener());
    }

    /** Delivers what this replica sent to {@code other}. */
    void deliverTo(Replica other) {
      outbox.forEach(other.sync::apply);
      outbox.clear();
    }
  }

  @Test
  void anotherReplicasReservationMovesHereAsItMovesThere() {
    Replica a = new Replica(1);
    Replica b = new Replica(2);
    Reservation r = a.ledger.reserve(W, 4096, new long[] {11, 12, 13}, 2);
    a.deliverTo(b);
    LocalLoad seen = b.ledger.local(W);
    assertThat(seen.prefillTokens()).isEqualTo(4096);
    assertThat(seen.requests()).isEqualTo(1);
    assertThat(b.ledger.activePrefixBlocks(W, new long[] {11, 12, 13, 14})).as("its blocks, for sharing").isEqualTo(3);
    assertThat(b.outbox).as("a copy is not forwarded again: B only asks the replica it just heard for its "
        + "reservations").hasSize(1);
    b.outbox.clear();

    a.ledger.prefillDone(r);
    a.deliverTo(b);
    assertThat(b.ledger.local(W).prefillTokens()).isZero();
    assertThat(b.ledger.local(W).requests()).isEqualTo(1);

    a.ledger.release(r);
    a.ledger.release(r); // idempotent there, one message
    a.deliverTo(b);
    assertThat(b.ledger.local(W).requests()).isZero();
    assertThat(b.ledger.totals()).containsExactly(0, 0, 0, 0, 0);
    assertThat(b.ledger.liveReservations()).isZero();
    assertThat(b.sync.applied()).isEqualTo(3);
  }

  @Test
  void aReplicaThatJoinsLateLearnsWhatIsAlreadyInFlightInItsStateAndOnlyOnce() {
    Replica a = new Replica(1);
    Reservation streaming = a.ledger.reserve(W, 4096, new long[] {1, 2}, 1);
    a.ledger.prefillDone(streaming); // answering: only its blocks are held now
    a.ledger.reserve(W, 8192, new long[] {3}, 0); // still in prefill
    Reservation done = a.ledger.reserve(W, 100, new long[] {4}, 0);
    a.ledger.release(done);
    a.outbox.clear(); // B was not there: it heard none of this

    Replica b = new Replica(2);
    b.sync.heartbeat();
    b.deliverTo(a); // A hears B for the first time: sends what it holds and asks B for its own
    assertThat(a.sync.resent()).isEqualTo(2);
    a.deliverTo(b);
    assertThat(b.ledger.liveReservations()).isEqualTo(2);
    assertThat(b.ledger.local(W).requests()).isEqualTo(2);
    assertThat(b.ledger.local(W).prefillTokens()).as("the answering one's prefill is done").isEqualTo(8192);
    // B heard A first through that: it asks A too, and A sends everything again: applied once
    b.deliverTo(a);
    assertThat(a.sync.resent()).isEqualTo(4);
    a.deliverTo(b);
    assertThat(b.ledger.liveReservations()).isEqualTo(2);
    assertThat(b.ledger.local(W).requests()).isEqualTo(2);
    assertThat(b.sync.copies()).isEqualTo(2);
    // and they move as usual from here
    a.ledger.release(streaming);
    a.deliverTo(b);
    assertThat(b.ledger.local(W).requests()).isEqualTo(1);
    assertThat(b.ledger.local(W).prefillTokens()).isEqualTo(8192);
  }

  @Test
  void predictionsAreSharedAndOwnMessagesIgnored() {
    Replica a = new Replica(1);
    Replica b = new Replica(2);
    PrefixOverlapSource shared = a.sync.sharing(a.index);
    shared.recordPrediction(W, new long[] {1, 2, 3, 4, 5});
    assertThat(a.predictions).containsExactly("w1:5");
    List<byte[]> sent = List.copyOf(a.outbox);
    a.deliverTo(b);
    assertThat(b.predictions).containsExactly("w1:5");
    sent.forEach(a.sync::apply); // looped back to its sender
    assertThat(a.predictions).containsExactly("w1:5");
    assertThat(a.sync.peerCount()).isZero();
  }

  @Test
  void aSilentReplicasCopiesAreReleasedAfterThePeerTimeout() {
    Replica a = new Replica(1);
    Replica b = new Replica(2);
    a.ledger.reserve(W, 100, new long[] {7}, 1);
    a.ledger.reserve(W, 200, new long[] {8}, 1);
    a.deliverTo(b);
    assertThat(b.ledger.local(W).requests()).isEqualTo(2);
    now.addAndGet(TimeUnit.SECONDS.toNanos(2));
    a.sync.heartbeat();
    a.deliverTo(b);
    now.addAndGet(TimeUnit.SECONDS.toNanos(2));
    assertThat(b.sync.expireSilent()).as("heard 2 s ago").isZero();
    now.addAndGet(TimeUnit.SECONDS.toNanos(2));
    assertThat(b.sync.expireSilent()).isEqualTo(1);
    assertThat(b.ledger.local(W).requests()).isZero();
    assertThat(b.ledger.liveReservations()).isZero();
    assertThat(b.sync.peerCount()).isZero();
    assertThat(b.sync.peersLost()).isEqualTo(1);
  }

  @Test
  void aCopyWhoseReleaseWasLostExpiresWithTheLedgerAndIsForgotten() {
    Replica a = new Replica(1);
    Replica b = new Replica(2);
    Reservation r = a.ledger.reserve(W, 100, new long[] {7}, 1);
    a.deliverTo(b);
    a.ledger.release(r);
    a.outbox.clear(); // the release is lost
    now.addAndGet(TimeUnit.MINUTES.toNanos(6));
    assertThat(b.ledger.sweep()).as("the ledger's own expiry").isEqualTo(1);
    a.sync.heartbeat();
    a.deliverTo(b); // the peer is alive
    assertThat(b.sync.expireSilent()).isZero();
    assertThat(b.sync.copies()).isZero();
    assertThat(b.sync.peerCount()).isEqualTo(1);
  }

  @Test
  void aMalformedMessageIsCountedAndChangesNothing() {
    Replica b = new Replica(2);
    b.sync.apply(new byte[] {(byte) 0x93, 1});
    b.sync.apply(new byte[0]);
    assertThat(b.sync.malformed()).isEqualTo(2);
    assertThat(b.ledger.liveReservations()).isZero();
    // a release of a reservation never copied here (its reserve was lost) is harmless
    Replica a = new Replica(1);
    Reservation r = a.ledger.reserve(W, 10, new long[] {1}, 0);
    a.outbox.clear();
    a.ledger.release(r);
    a.deliverTo(b);
    assertThat(b.ledger.totals()).containsExactly(0, 0, 0, 0, 0);
  }
}
