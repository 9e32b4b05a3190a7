package dev.kvrouter.extproc.replicas;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.LocalLoad;
import dev.kvrouter.extproc.load.Reservation;
import dev.kvrouter.extproc.routing.Overlap;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerSet;
import dev.kvrouter.xds.server.EnvoyClusters;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

class ReplicaSyncTest {

  static final WorkerId W = new WorkerId("w1", 0);
  static final WorkerSet FLEET = new WorkerSet(1, List.of(worker("w1"), worker("w2"), worker("w3"), worker("w4")));

  static Worker worker(String name) {
    return Worker.simple(name, "10.0.0.1", 8000, "m");
  }
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
    /** What this replica's Envoys hold, when it serves xDS. */
    final AtomicReference<EnvoyClusters.Holding> envoys = new AtomicReference<>(EnvoyClusters.Holding.NONE);
    final EnvoyGate gate;

    Replica(long id) {
      this(id, false);
    }

    /** @param xds whether it serves xDS, and so has Envoys of its own to tell the others of */
    Replica(long id, boolean xds) {
      this(id, xds, true);
    }

    /** @param routes false for an xds-mode process: it serves xDS and only shares its Envoys' view */
    Replica(long id, boolean xds, boolean routes) {
      gate = new EnvoyGate(xds ? envoys::get : null, () -> FLEET);
      if (routes) {
        sync = new ReplicaSync(id, ledger, index, outbox::add, now::get, TimeUnit.SECONDS.toNanos(3), gate);
        ledger.setListener(sync.ledgerListener());
      } else {
        sync = ReplicaSync.viewOnly(id, outbox::add, now::get, TimeUnit.SECONDS.toNanos(3), gate);
      }
    }

    /** Its Envoys now hold {@code workers}, and it tells the others. */
    void envoysHold(int envoyCount, String... workers) {
      envoys.set(new EnvoyClusters.Holding(envoyCount, Set.of(workers)));
      gate.ownChanged();
      sync.sendEnvoys();
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
    assertThat(b.outbox).as("a copy is not forwarded again: B only sends its own state (none: its end alone) and asks "
        + "the replica it just heard for its reservations").extracting(ReplicaSyncTest::kind)
        .containsExactly(ReplicaSync.HEARTBEAT, ReplicaSync.SYNC_REQUEST);
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

  /** Two replicas that heard each other (each has the other's state): A's reservations are copied at B. */
  private void introduce(Replica a, Replica b) {
    b.sync.heartbeat();
    b.deliverTo(a);
    a.deliverTo(b);
    b.deliverTo(a);
    a.deliverTo(b);
    assertThat(a.outbox).isEmpty();
    assertThat(b.outbox).isEmpty();
  }

  /**
   * A release lost on the link (the sender's queue full, a high-water mark, a reconnect) left its copy at the others
   * until the ledger's expiry (5 minutes) or the peer's silence: the messages had no numbers and the loss went
   * unseen. Now the next message (at the latest the next heartbeat, a second later) shows the gap, B asks A for what
   * it holds, and the copy A no longer has is released at once.
   */
  @Test
  void aReleaseLostOnTheLinkIsSeenAsAGapAndItsCopyReleasedAtOnce() {
    Replica a = new Replica(1);
    Replica b = new Replica(2);
    introduce(a, b);
    Reservation lost = a.ledger.reserve(W, 4096, new long[] {11, 12}, 2);
    Reservation kept = a.ledger.reserve(W, 1000, new long[] {21}, 1);
    a.deliverTo(b);
    assertThat(b.ledger.local(W).requests()).isEqualTo(2);

    a.ledger.release(lost);
    a.outbox.clear(); // lost on the way
    assertThat(b.ledger.local(W).requests()).as("B cannot know yet").isEqualTo(2);
    a.sync.heartbeat();
    a.deliverTo(b);
    assertThat(b.sync.gaps()).isEqualTo(1);
    assertThat(b.sync.missed()).isEqualTo(1);
    assertThat(b.outbox).as("B asks A for its state").extracting(ReplicaSyncTest::kind)
        .containsExactly(ReplicaSync.RESYNC);
    b.deliverTo(a);
    a.deliverTo(b);
    assertThat(b.ledger.local(W).requests()).as("the lost release's copy gone, no time having passed").isEqualTo(1);
    assertThat(b.ledger.local(W).prefillTokens()).isEqualTo(1000);
    assertThat(b.sync.copies()).isEqualTo(1);
    assertThat(b.sync.resyncs()).isEqualTo(1);
    assertThat(b.sync.staleReleased()).isEqualTo(1);
    assertThat(b.sync.malformed()).isZero();

    a.ledger.release(kept);
    a.deliverTo(b);
    assertThat(b.ledger.liveReservations()).isZero();
    assertThat(b.ledger.totals()).containsExactly(0, 0, 0, 0, 0);
    assertThat(b.sync.gaps()).as("nothing lost since").isEqualTo(1);
  }

  /** An xds process keeps nothing of the routers' load: a gap in a router's messages is counted, no state asked for. */
  @Test
  void anXdsProcessAsksNoRouterForItsState() {
    Replica xds = new Replica(1, true, false);
    Replica router = new Replica(2, true);
    introduce(router, xds);
    Reservation r = router.ledger.reserve(W, 10, new long[] {1}, 1);
    router.ledger.release(r);
    router.outbox.clear();
    router.sync.heartbeat();
    router.deliverTo(xds);
    assertThat(xds.sync.gaps()).isEqualTo(1);
    assertThat(xds.outbox).isEmpty();
  }

  /** A reservation or its first byte lost on the way comes with the state asked for, in its current state. */
  @Test
  void aLostReservationAndALostFirstByteComeWithTheStateAskedFor() {
    Replica a = new Replica(1);
    Replica b = new Replica(2);
    introduce(a, b);
    Reservation answering = a.ledger.reserve(W, 4096, new long[] {11}, 1);
    a.deliverTo(b);
    a.ledger.prefillDone(answering);
    a.ledger.reserve(W, 8192, new long[] {21}, 1);
    a.outbox.clear(); // both lost
    a.sync.heartbeat();
    a.deliverTo(b);
    b.deliverTo(a);
    a.deliverTo(b);
    assertThat(b.ledger.local(W).requests()).isEqualTo(2);
    assertThat(b.ledger.local(W).prefillTokens()).as("the first's prefill done, the second's pending").isEqualTo(8192);
    assertThat(b.sync.missed()).isEqualTo(2);
    assertThat(b.sync.staleReleased()).isZero();
  }

  /**
   * The question lost too: B asks again after {@link ReplicaSync#RESYNC_RETRY_NANOS}, on its once-a-second round; and
   * several gaps before the answer ask once.
   */
  @Test
  void aLostQuestionIsAskedAgain() {
    Replica a = new Replica(1);
    Replica b = new Replica(2);
    introduce(a, b);
    Reservation r = a.ledger.reserve(W, 4096, new long[] {11}, 1);
    a.deliverTo(b);
    a.ledger.release(r);
    a.outbox.clear();
    a.sync.heartbeat();
    a.deliverTo(b);
    a.ledger.reserve(W, 5, new long[] {1}, 1);
    a.outbox.clear();
    a.sync.heartbeat();
    a.deliverTo(b);
    assertThat(b.sync.gaps()).isEqualTo(2);
    assertThat(b.outbox).as("asked once").hasSize(1);
    b.outbox.clear(); // the question lost
    b.sync.expireSilent();
    assertThat(b.outbox).as("not yet").isEmpty();
    now.addAndGet(ReplicaSync.RESYNC_RETRY_NANOS);
    a.sync.heartbeat(); // A is still heard
    a.deliverTo(b);
    b.sync.expireSilent();
    assertThat(b.outbox).extracting(ReplicaSyncTest::kind).containsExactly(ReplicaSync.RESYNC);
    b.deliverTo(a);
    a.deliverTo(b);
    assertThat(b.ledger.local(W).requests()).isEqualTo(1);
    assertThat(b.ledger.local(W).prefillTokens()).isEqualTo(5);
    assertThat(b.sync.resyncs()).isEqualTo(1);
    assertThat(a.sync.gaps()).as("the lost question was a message of B's lost: A asked B for its state").isEqualTo(1);
    b.deliverTo(a);
    a.deliverTo(b);
    assertThat(a.sync.resyncs()).isEqualTo(1);
    b.sync.expireSilent();
    a.sync.expireSilent();
    assertThat(b.outbox).as("answered: not asked again").isEmpty();
    assertThat(a.outbox).isEmpty();
  }

  /**
   * A state that arrives with a gap of its own is not trusted (a copy it lacks may be in the part lost): B asks
   * again, and the next whole one replaces what B held.
   */
  @Test
  void aStateHeardInPartIsAskedForAgain() {
    Replica a = new Replica(1);
    Replica b = new Replica(2);
    introduce(a, b);
    Reservation r = a.ledger.reserve(W, 4096, new long[] {11}, 1);
    a.ledger.reserve(W, 7, new long[] {12}, 1);
    a.deliverTo(b);
    a.ledger.release(r);
    a.outbox.clear();
    a.sync.heartbeat();
    a.deliverTo(b);
    b.deliverTo(a);
    a.outbox.remove(1); // the state's reservation lost: the state's end shows the gap
    a.deliverTo(b);
    assertThat(b.sync.resyncs()).isZero();
    assertThat(b.sync.copies()).as("nothing released on a state heard in part").isEqualTo(2);
    assertThat(b.outbox).extracting(ReplicaSyncTest::kind).containsExactly(ReplicaSync.RESYNC);
    b.deliverTo(a);
    a.deliverTo(b);
    assertThat(b.sync.resyncs()).isEqualTo(1);
    assertThat(b.ledger.local(W).requests()).isEqualTo(1);
    assertThat(b.ledger.local(W).prefillTokens()).isEqualTo(7);
  }

  /** Several replicas asking after the same loss get one state: a state begun since a question answers it. */
  @Test
  void questionsAStateAlreadyAnswersAreNotAnsweredAgain() {
    Replica a = new Replica(1);
    Replica b = new Replica(2);
    introduce(a, b);
    Reservation r = a.ledger.reserve(W, 4096, new long[] {11}, 1);
    a.deliverTo(b);
    a.ledger.release(r);
    a.outbox.clear();
    a.sync.heartbeat();
    a.deliverTo(b);
    byte[] question = b.outbox.get(0);
    b.deliverTo(a);
    int state = a.outbox.size();
    assertThat(state).isPositive();
    a.sync.apply(question); // the same question again (as a third replica's would be: it saw the same gap)
    assertThat(a.outbox).hasSize(state);
  }

  /**
   * A peer followed at two addresses delivers each message twice: applied once, so a reservation heard again after
   * its release is not copied again (it stayed until the ledger's expiry).
   */
  @Test
  void aMessageHeardTwiceIsAppliedOnce() {
    Replica a = new Replica(1);
    Replica b = new Replica(2);
    introduce(a, b);
    Reservation r = a.ledger.reserve(W, 4096, new long[] {11}, 1);
    byte[] reserve = a.outbox.get(0);
    a.deliverTo(b);
    a.ledger.release(r);
    a.deliverTo(b);
    b.sync.apply(reserve);
    assertThat(b.ledger.liveReservations()).isZero();
    assertThat(b.sync.duplicates()).isEqualTo(1);
    assertThat(b.sync.gaps()).isZero();
  }

  /**
   * A replica of before the sequence numbers (a rolling upgrade) is heard as ever: its messages carry none, nothing of
   * it is a gap, and a release of it lost still stays until the ledger's expiry or its silence (as it did between any
   * two replicas before).
   */
  @Test
  void aReplicaOfBeforeTheSequenceNumbersIsHeardAsEver() throws Exception {
    Replica b = new Replica(2);
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(11).packInt(ReplicaSync.RESERVE).packLong(7).packLong(70).packString("w1").packInt(0)
          .packLong(4096).packInt(1).packBinaryHeader(8).writePayload(new byte[8]).packLong(1).packLong(4096)
          .packInt(16);
      b.sync.apply(p.toByteArray());
    }
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(11).packInt(ReplicaSync.RESERVE).packLong(7).packLong(71).packString("w1").packInt(0)
          .packLong(100).packInt(1).packBinaryHeader(8).writePayload(new byte[8]).packLong(2).packLong(100)
          .packInt(16);
      b.sync.apply(p.toByteArray());
    }
    for (int i = 0; i < 2; i++) {
      try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
        p.packArrayHeader(2).packInt(ReplicaSync.HEARTBEAT).packLong(7);
        b.sync.apply(p.toByteArray());
      }
    }
    assertThat(b.sync.copies()).isEqualTo(2);
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(3).packInt(ReplicaSync.RELEASED).packLong(7).packLong(71);
      b.sync.apply(p.toByteArray());
    }
    assertThat(b.ledger.local(W).requests()).isEqualTo(1);
    assertThat(b.sync.malformed()).isZero();
    assertThat(b.sync.gaps()).isZero();
    assertThat(b.outbox).extracting(ReplicaSyncTest::kind).as("its state and a sync request, as ever; no question")
        .doesNotContain(ReplicaSync.RESYNC);
  }

  /**
   * What a replica of before the sequence numbers reads of a numbered message: each kind's fields in their places,
   * the number after them (it reads no further).
   */
  @Test
  void aNumberedMessageKeepsTheFieldsWhereAReplicaOfBeforeReadsThem() throws Exception {
    Replica a = new Replica(1);
    a.ledger.reserve(W, 4096, new long[] {11}, 1);
    a.sync.heartbeat();
    assertThat(a.outbox).hasSize(2);
    try (org.msgpack.core.MessageUnpacker u = MessagePack.newDefaultUnpacker(a.outbox.get(0))) {
      assertThat(u.unpackArrayHeader()).isEqualTo(12);
      assertThat(u.unpackInt()).isEqualTo(ReplicaSync.RESERVE);
      assertThat(u.unpackLong()).isEqualTo(1);
      u.unpackLong(); // id
      assertThat(u.unpackString()).isEqualTo("w1");
      assertThat(u.unpackInt()).isZero();
      assertThat(u.unpackLong()).isEqualTo(4096);
      assertThat(u.unpackInt()).isEqualTo(1);
      assertThat(u.unpackBinaryHeader()).isEqualTo(8);
      u.readPayload(8);
      u.unpackLong(); // turn
      u.unpackLong(); // prompt tokens
      u.unpackInt(); // block size
      assertThat(u.unpackLong()).as("the sequence number, last").isEqualTo(1);
    }
    try (org.msgpack.core.MessageUnpacker u = MessagePack.newDefaultUnpacker(a.outbox.get(1))) {
      assertThat(u.unpackArrayHeader()).isEqualTo(4);
      assertThat(u.unpackInt()).isEqualTo(ReplicaSync.HEARTBEAT);
      assertThat(u.unpackLong()).isEqualTo(1);
      assertThat(u.unpackLong()).as("no state").isZero();
      assertThat(u.unpackLong()).isEqualTo(2);
    }
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

  /**
   * A replica that joins (restarted: a new identity) starts with no turns; it learns every worker's last turn
   * from the first replica that hears it, so its ties break as the others' do from its first decision, not only
   * once each worker has been given a request again.
   */
  @Test
  void aReplicaThatJoinsLateLearnsEveryWorkersLastTurn() {
    Replica a = new Replica(1);
    for (int i = 1; i <= 3; i++) {
      a.ledger.release(a.ledger.reserve(new WorkerId("w" + i, 0), 10, new long[] {i}, 0));
    }
    a.outbox.clear(); // nobody was listening
    Replica b = new Replica(2);
    b.sync.heartbeat();
    b.deliverTo(a); // a hears b for the first time: sends the turns and its reservations still held (none)
    a.deliverTo(b);
    for (int i = 1; i <= 3; i++) {
      assertThat(b.ledger.lastTurn(new WorkerId("w" + i, 0))).isEqualTo(i);
    }
    assertThat(b.ledger.lastTurns()).isEqualTo(a.ledger.lastTurns());
    assertThat(b.ledger.reserve(W, 10, new long[] {9}, 0).turn()).as("b decides after them").isEqualTo(4);
    assertThat(b.sync.malformed()).isZero();
  }

  @Test
  void aCopyKeepsItsSendersTurnAndAMessageWithoutOneTakesTheNext() throws Exception {
    Replica a = new Replica(1);
    Replica b = new Replica(2);
    for (int i = 0; i < 5; i++) {
      a.ledger.reserve(new WorkerId("w" + i, 0), 10, new long[] {i}, 0);
    }
    a.deliverTo(b);
    assertThat(b.ledger.lastTurn(new WorkerId("w4", 0))).isEqualTo(5);
    assertThat(b.ledger.reserve(W, 10, new long[] {9}, 0).turn()).as("B decides after what it heard").isEqualTo(6);

    // a replica of before the turn: the reservation's eight fields only
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(8).packInt(ReplicaSync.RESERVE).packLong(3).packLong(77).packString("w9").packInt(0)
          .packLong(10).packInt(0).packBinaryHeader(8).writePayload(new byte[8]);
      b.sync.apply(p.toByteArray());
    }
    assertThat(b.sync.malformed()).isZero();
    assertThat(b.ledger.local(new WorkerId("w9", 0)).requests()).isEqualTo(1);
    assertThat(b.ledger.lastTurn(new WorkerId("w9", 0))).isEqualTo(7);
  }

  /**
   * Two replicas send siblings of one new prompt to one worker before hearing of each other: each charged a whole
   * cold prefill. The engine computes the prompt once, so each ledger keeps its own charge and trims the copy to
   * the prompt's tokens beyond the blocks already in flight there; a copy for a worker holding none of it is kept.
   */
  @Test
  void aCopyOfAPrefillAlreadyInFlightOnItsWorkerIsChargedOnce() {
    Replica a = new Replica(1);
    Replica b = new Replica(2);
    long[] prompt = {11, 12, 13, 14};
    a.ledger.reserve(W, 70, prompt, 1, 70, 16);
    b.ledger.reserve(W, 70, prompt, 1, 70, 16);
    a.deliverTo(b);
    b.deliverTo(a);
    assertThat(a.ledger.local(W).prefillTokens()).as("70 + the 6 tokens past the four blocks").isEqualTo(76);
    assertThat(b.ledger.local(W).prefillTokens()).isEqualTo(76);
    assertThat(a.ledger.local(W).requests()).isEqualTo(2);

    WorkerId other = new WorkerId("w2", 0);
    a.ledger.reserve(other, 70, new long[] {11, 12, 13, 14, 15}, 1, 86, 16); // 16 of its 86 tokens credited
    a.deliverTo(b);
    assertThat(b.ledger.local(other).prefillTokens()).as("nothing in flight there").isEqualTo(70);
    a.ledger.reserve(W, 6, new long[] {11, 12, 13, 14, 15}, 1, 86, 16); // all 5 blocks cached, by the sender's view
    a.deliverTo(b);
    assertThat(b.ledger.local(W).prefillTokens()).as("never more than the sender charged (22 beyond the four in "
        + "flight)").isEqualTo(76 + 6);
  }

  /**
   * The other order: the copy arrives after this replica scored its sibling as a cold prefill and before it
   * reserved it. The own reservation is trimmed as a copy would be, so each ledger charges the prompt once
   * whichever of the two reached it first (charged twice, the next sibling saw two prefills queued and left: seen
   * in the decision records of best-of-4 groups split through Envoy).
   */
  @Test
  void anOwnReservationBehindACopyOfTheSamePrefillIsChargedOnce() {
    Replica a = new Replica(1);
    Replica b = new Replica(2);
    long[] prompt = {11, 12, 13, 14};
    b.ledger.reserve(W, 70, prompt, 1, 70, 16);
    b.deliverTo(a);
    a.ledger.reserve(W, 70, prompt, 1, 70, 16); // scored before the copy arrived: a cold prefill
    assertThat(a.ledger.local(W).prefillTokens()).as("70 + the 6 tokens past the four blocks").isEqualTo(76);
    a.deliverTo(b);
    assertThat(b.ledger.local(W).prefillTokens()).isEqualTo(76);
    assertThat(a.ledger.local(W).requests()).isEqualTo(2);
    assertThat(b.ledger.local(W).requests()).isEqualTo(2);
    assertThat(a.ledger.local(new WorkerId("w2", 0)).prefillTokens()).isZero();
    a.ledger.reserve(new WorkerId("w2", 0), 70, prompt, 1, 70, 16);
    assertThat(a.ledger.local(new WorkerId("w2", 0)).prefillTokens()).as("nothing in flight there").isEqualTo(70);
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

  /**
   * A decision's reservation and prediction reach the other replica as one message, the prediction recorded
   * first: apart, a decision there could fall between them, see the request in flight as a cold prefill, and
   * send the next sibling elsewhere (through Envoy).
   */
  @Test
  void aReservationCarriesItsDecisionsPrediction() {
    Replica a = new Replica(1);
    LoadLedger ledgerB = new LoadLedger(now::get, TimeUnit.MINUTES.toNanos(5), 1000);
    List<String> predictedB = new ArrayList<>();
    PrefixOverlapSource indexB = new PrefixOverlapSource() {
      @Override
      public Lookup lookup(long[] blockHashes) {
        return worker -> Overlap.NONE;
      }

      @Override
      public void recordPrediction(WorkerId worker, long[] blockHashes) {
        // what a decision on B would see at this moment: the request in flight already, or not yet
        predictedB.add(worker.name() + ":" + blockHashes.length + " with " + ledgerB.local(worker).requests()
            + " in flight");
      }
    };
    ReplicaSync b = new ReplicaSync(2, ledgerB, indexB, m -> { }, now::get, TimeUnit.SECONDS.toNanos(3));
    PrefixOverlapSource shared = a.sync.sharing(a.index);
    long[] prompt = {1, 2, 3};
    a.ledger.reserve(W, 48, prompt, 1, 48, 16);
    shared.recordPrediction(W, prompt); // the router's order: reserve, then predict, the same array
    assertThat(a.outbox).as("one message").hasSize(1);
    a.outbox.forEach(b::apply);
    a.outbox.clear();
    assertThat(predictedB).containsExactly("w1:3 with 0 in flight");
    assertThat(ledgerB.local(W).requests()).isEqualTo(1);

    // a prediction of a decision the ledger did not account (no reservation just sent) goes on its own
    shared.recordPrediction(W, new long[] {1, 2, 3});
    assertThat(a.outbox).hasSize(1);
    a.outbox.forEach(b::apply);
    assertThat(predictedB).containsExactly("w1:3 with 0 in flight", "w1:3 with 1 in flight");
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

  /**
   * A reserve of fifteen bytes whose hashes claim almost 2 GiB (a multiple of 8, so not caught as odd): msgpack
   * allocates a payload as its header claims, and the OutOfMemoryError escaped apply and the link's catch, ending
   * the thread that hears and tells the other replicas. A length beyond what the message holds is malformed, read
   * without allocating it.
   */
  @Test
  void hashesClaimingMoreThanTheMessageHoldsAreMalformedAndNeverAllocated() throws Exception {
    Replica b = new Replica(2);
    com.sun.management.ThreadMXBean threads =
        (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
    // first a claim of 64 MiB, which any heap survives: a regression fails here, before the 2 GiB claim below
    long before = threads.getCurrentThreadAllocatedBytes();
    b.sync.apply(reserveClaimingHashBytes(64 << 20));
    assertThat(threads.getCurrentThreadAllocatedBytes() - before).as("bytes allocated reading it").isLessThan(1 << 20);
    assertThat(b.sync.malformed()).isEqualTo(1);

    byte[] message = reserveClaimingHashBytes(0x7FFF_FFF8);
    assertThat(message).hasSize(15);
    Throwable thrown = org.assertj.core.api.Assertions.catchThrowable(() -> b.sync.apply(message));
    assertThat(thrown).as("what escaped apply").isNull();
    assertThat(b.sync.malformed()).isEqualTo(2);
    assertThat(b.sync.peerCount()).as("a malformed message makes no peer").isZero();
    assertThat(b.outbox).as("and is sent nothing").isEmpty();
  }

  /**
   * No replica sends more than {@link ReplicaSync#MAX_HASHES} hashes, but one of 64 MiB fits eight times as many:
   * each became an entry of the worker's block counts (tens of bytes apiece, several hundred MiB for one message),
   * and a peer's reservations are kept up to the ledger's bound. A message past the count is malformed.
   */
  @Test
  void moreHashesThanAnyReplicaSendsAreMalformed() throws Exception {
    Replica b = new Replica(2);
    byte[] hashes = new byte[(ReplicaSync.MAX_HASHES + 1) * 8];
    java.nio.LongBuffer ids = java.nio.ByteBuffer.wrap(hashes).asLongBuffer();
    for (int i = 0; i < ReplicaSync.MAX_HASHES + 1; i++) {
      ids.put(i, i + 1);
    }
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(11).packInt(ReplicaSync.RESERVE).packLong(7).packLong(7).packString("w1").packInt(0)
          .packLong(100).packInt(1).packBinaryHeader(hashes.length).writePayload(hashes);
      p.packLong(1).packLong(0).packInt(0);
      byte[] m = p.toByteArray();
      assertThat(m.length).isLessThan(ReplicaSync.MAX_MESSAGE_BYTES);
      b.sync.apply(m);
    }
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(5).packInt(ReplicaSync.PREDICTED).packLong(7).packString("w1").packInt(0)
          .packBinaryHeader(hashes.length).writePayload(hashes);
      b.sync.apply(p.toByteArray());
    }
    assertThat(b.sync.malformed()).isEqualTo(2);
    assertThat(b.ledger.liveReservations()).isZero();
    assertThat(b.ledger.totals()).containsExactly(0, 0, 0, 0, 0);
    assertThat(b.predictions).isEmpty();
    assertThat(b.sync.peerCount()).isZero();
  }

  private static byte[] reserveClaimingHashBytes(int n) throws Exception {
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(11).packInt(ReplicaSync.RESERVE).packLong(7).packLong(7).packString("w1").packInt(0)
          .packLong(100).packInt(1).packBinaryHeader(n); // no payload follows
      return p.toByteArray();
    }
  }

  /**
   * Turns or a worker's name claiming more than the message holds are malformed as a whole: nothing of the
   * message is applied (the turns before the bad count were), and its sender, never heard before, is not made a
   * peer (it was, and sent every reservation held here).
   */
  @Test
  void aMalformedMessageFromANewReplicaAppliesNothingAndMakesNoPeer() throws Exception {
    Replica b = new Replica(2);
    b.ledger.reserve(W, 10, new long[] {1}, 0);
    b.outbox.clear();
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(3).packInt(ReplicaSync.TURNS).packLong(5).packArrayHeader(300_000_000)
          .packString("w7").packInt(0).packLong(40);
      b.sync.apply(p.toByteArray());
    }
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(5).packInt(ReplicaSync.PREDICTED).packLong(6).packRawStringHeader(1 << 30);
      b.sync.apply(p.toByteArray());
    }
    assertThat(b.sync.malformed()).isEqualTo(2);
    assertThat(b.ledger.lastTurn(new WorkerId("w7", 0))).isZero();
    assertThat(b.predictions).isEmpty();
    assertThat(b.sync.peerCount()).isZero();
    assertThat(b.outbox).isEmpty();
  }

  /**
   * Every replica id heard was made a peer, kept for the peer timeout and sent everything held here: a member
   * that sends under ever new ids (a bug, a replica in a crash loop) grew the peers without bound within the
   * timeout and had this replica resend its reservations for each. Past {@link ReplicaSync#MAX_PEERS} a new id is
   * not heard until one is dropped for silence.
   */
  @Test
  void theMembersHeardAreBounded() throws Exception {
    Replica b = new Replica(2);
    b.ledger.reserve(W, 10, new long[] {1}, 0);
    b.outbox.clear();
    int ids = ReplicaSync.MAX_PEERS + 500;
    for (long from = 100; from < 100 + ids; from++) {
      try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
        p.packArrayHeader(2).packInt(ReplicaSync.HEARTBEAT).packLong(from);
        b.sync.apply(p.toByteArray());
      }
    }
    assertThat(b.sync.peerCount()).isEqualTo(ReplicaSync.MAX_PEERS);
    assertThat(b.outbox).as("the turns, the reservation, the state's end and a sync request for each peer heard")
        .hasSize(4 * ReplicaSync.MAX_PEERS);
    now.addAndGet(TimeUnit.SECONDS.toNanos(4));
    b.sync.expireSilent();
    Replica a = new Replica(1);
    a.sync.heartbeat();
    a.deliverTo(b);
    assertThat(b.sync.peerCount()).as("heard once the others fell silent").isEqualTo(1);
  }

  /** A kind this replica does not know (a newer replica's, or noise) is counted; its sender is not made a peer. */
  @Test
  void aMessageOfAnUnknownKindMakesNoPeerAndGetsNoResend() throws Exception {
    Replica b = new Replica(2);
    b.ledger.reserve(W, 10, new long[] {1}, 0);
    b.outbox.clear();
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(2).packInt(99).packLong(5);
      b.sync.apply(p.toByteArray());
    }
    assertThat(b.sync.malformed()).isEqualTo(1);
    assertThat(b.sync.peerCount()).isZero();
    assertThat(b.outbox).isEmpty();
  }

  /**
   * No message exceeds what the link reads ({@link ReplicaSync#MAX_MESSAGE_BYTES}): a prompt longer than
   * {@link ReplicaSync#MAX_HASHES} blocks sends its first ones, and a fleet's turns go in messages of bounded size.
   */
  @Test
  void noMessageOutgrowsWhatTheLinkReads() {
    Replica a = new Replica(1);
    Replica b = new Replica(2);
    a.ledger.reserve(W, 10, new long[ReplicaSync.MAX_HASHES + 5], 0);
    for (int i = 0; i < ReplicaSync.TURNS_PER_MESSAGE + 10; i++) {
      a.ledger.noteTurn(new WorkerId("worker-" + i, 0), i + 1);
    }
    a.outbox.clear();
    b.sync.heartbeat();
    b.deliverTo(a); // a hears b first: sends it the turns and the reservation
    assertThat(a.outbox).as("two of turns, the reservation, the state's end, the sync request").hasSize(5).allSatisfy(m -> assertThat(m.length).isLessThan(ReplicaSync.MAX_MESSAGE_BYTES));
    a.deliverTo(b);
    assertThat(b.sync.malformed()).isZero();
    assertThat(b.ledger.lastTurns()).isEqualTo(a.ledger.lastTurns());
    assertThat(b.predictions).containsExactly("w1:" + ReplicaSync.MAX_HASHES);
  }

  /**
   * An Envoy's xDS stream goes to one replica, its ext_proc requests to all: the others hold back the workers that
   * replica's Envoys do not hold yet, and let them in once they do. A view that knows no Envoy holds nothing back,
   * and a replica without an xDS server (the ext-proc mode) has no view to send.
   */
  @Test
  void whatOneReplicasEnvoysHoldGatesTheOthersRouting() throws Exception {
    Replica a = new Replica(1, true);
    Replica b = new Replica(2);
    assertThat(b.gate.missing(FLEET)).as("no Envoy known anywhere").isEmpty();
    a.envoysHold(1, "w1", "w2", "w3");
    a.deliverTo(b);
    assertThat(b.gate.missing(FLEET)).containsExactly("w4");
    assertThat(b.gate.holds(worker("w1"))).isTrue();
    assertThat(b.gate.peersKnowingEnvoys()).isEqualTo(1);
    assertThat(b.outbox).as("B serves no xDS: it only asks A for what A has (its own state: its end alone)")
        .extracting(ReplicaSyncTest::kind).containsExactly(ReplicaSync.HEARTBEAT, ReplicaSync.SYNC_REQUEST);
    b.outbox.clear();

    a.envoysHold(2, "w1", "w2", "w3", "w4");
    a.deliverTo(b);
    assertThat(b.gate.missing(FLEET)).isEmpty();
    a.envoysHold(0); // its Envoys gone (forgotten after a minute): they hold nothing back any more
    a.deliverTo(b);
    assertThat(b.gate.missing(FLEET)).isEmpty();
    assertThat(b.gate.peersKnowingEnvoys()).isZero();
    assertThat(b.sync.malformed()).isZero();
  }

  /** Every view that knows an Envoy has a say, this replica's own and each peer's; one knowing none has none. */
  @Test
  void aWorkerIsHeldWhenEveryViewThatKnowsAnEnvoyListsIt() {
    AtomicReference<EnvoyClusters.Holding> own = new AtomicReference<>(new EnvoyClusters.Holding(1, Set.of("w1", "w2", "w4")));
    EnvoyGate gate = new EnvoyGate(own::get, () -> FLEET);
    assertThat(gate.missing(FLEET)).containsExactly("w3");
    gate.peer(7, new EnvoyClusters.Holding(2, Set.of("w1", "w2", "w3")));
    gate.peer(8, EnvoyClusters.Holding.NONE);
    assertThat(gate.missing(FLEET)).containsExactly("w3", "w4");
    own.set(EnvoyClusters.Holding.NONE);
    gate.ownChanged();
    assertThat(gate.missing(FLEET)).containsExactly("w4");
    gate.peer(8, new EnvoyClusters.Holding(1, Set.of("w1")));
    assertThat(gate.missing(FLEET)).containsExactly("w2", "w3", "w4");
    gate.forget(7);
    gate.forget(8);
    assertThat(gate.missing(FLEET)).isEmpty();
  }

  /** A peer dropped for silence (crashed, or the link is down) no longer holds any worker back. */
  @Test
  void aSilentReplicasEnvoysNoLongerHoldWorkersBack() {
    Replica a = new Replica(1, true);
    Replica b = new Replica(2);
    a.envoysHold(1, "w1", "w2", "w3");
    a.deliverTo(b);
    assertThat(b.gate.missing(FLEET)).containsExactly("w4");
    now.addAndGet(TimeUnit.SECONDS.toNanos(2));
    assertThat(b.sync.expireSilent()).isZero();
    assertThat(b.gate.missing(FLEET)).containsExactly("w4");
    now.addAndGet(TimeUnit.SECONDS.toNanos(2));
    assertThat(b.sync.expireSilent()).isEqualTo(1);
    assertThat(b.gate.missing(FLEET)).isEmpty();
    assertThat(b.gate.peersKnowingEnvoys()).isZero();
  }

  /**
   * A replica running code of before the Envoys message serves its Envoys' xDS and never tells the others what they
   * hold: those Envoys are unknown here and hold nothing back (routing to them as before the message), while the
   * replica is a peer for everything else it sends, and this replica's own Envoys still have their say.
   */
  @Test
  void aReplicaThatNeverSendsItsEnvoysViewHoldsNothingBack() {
    Replica old = new Replica(1); // heartbeats and reservations, never an Envoys message
    Replica b = new Replica(2, true);
    old.sync.heartbeat();
    old.ledger.reserve(W, 100, new long[] {1, 2}, 1);
    old.deliverTo(b);
    assertThat(b.sync.peerCount()).isEqualTo(1);
    assertThat(b.sync.copies()).isEqualTo(1);
    assertThat(b.gate.missing(FLEET)).isEmpty();
    assertThat(b.gate.peersKnowingEnvoys()).isZero();
    b.envoysHold(1, "w1", "w2");
    assertThat(b.gate.missing(FLEET)).containsExactly("w3", "w4");
    now.addAndGet(TimeUnit.SECONDS.toNanos(4));
    assertThat(b.sync.expireSilent()).isEqualTo(1);
    assertThat(b.gate.missing(FLEET)).as("the old replica's silence changes nothing of the gate").containsExactly("w3",
        "w4");
  }

  /**
   * The view is sent when it changes, and that message may be lost or go to a replica not listening yet: a replica
   * heard for the first time is sent it with what is in flight, and every heartbeat carries it again.
   */
  @Test
  void aReplicaHeardLateOrThatLostTheMessageLearnsWhatTheEnvoysHold() {
    Replica a = new Replica(1, true);
    a.envoysHold(1, "w1", "w2", "w3");
    a.outbox.clear(); // nobody was listening
    Replica b = new Replica(2);
    b.sync.heartbeat();
    b.deliverTo(a); // A hears B for the first time
    a.deliverTo(b);
    assertThat(b.gate.missing(FLEET)).containsExactly("w4");

    a.envoysHold(1, "w1", "w2", "w3", "w4");
    a.outbox.clear(); // lost
    assertThat(b.gate.missing(FLEET)).containsExactly("w4");
    a.sync.heartbeat();
    a.deliverTo(b);
    assertThat(b.gate.missing(FLEET)).isEmpty();
  }

  /**
   * A view whose names take more than {@link ReplicaSync#MAX_ENVOY_VIEW_BYTES} lists the first of them, in order,
   * within what the link reads; the other replicas hold the rest back, as if those Envoys lacked them.
   */
  @Test
  void anEnvoysViewPastItsBytesListsTheFirstWorkersAndStaysWithinTheLink() {
    Replica a = new Replica(1, true);
    Replica b = new Replica(2);
    String pad = "x".repeat(90);
    int n = ReplicaSync.MAX_ENVOY_VIEW_BYTES / 95 + 1000;
    Set<String> names = new java.util.HashSet<>();
    for (int i = 0; i < n; i++) {
      names.add(String.format("w%07d-%s", i, pad));
    }
    a.envoysHold(1, names.toArray(String[]::new));
    assertThat(a.outbox).hasSize(1).allSatisfy(m -> assertThat(m.length).isLessThan(ReplicaSync.MAX_MESSAGE_BYTES)
        .isGreaterThan(ReplicaSync.MAX_ENVOY_VIEW_BYTES - 1000));
    a.deliverTo(b);
    assertThat(b.sync.malformed()).isZero();
    assertThat(b.gate.holds(worker(String.format("w%07d-%s", 0, pad)))).isTrue();
    assertThat(b.gate.holds(worker(String.format("w%07d-%s", n - 1, pad)))).as("past the cap").isFalse();
  }

  /** An Envoys message claiming more names than it holds, or a negative count, is malformed and makes no peer. */
  @Test
  void aMalformedEnvoysMessageChangesNothing() throws Exception {
    Replica b = new Replica(2);
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(4).packInt(ReplicaSync.ENVOYS).packLong(5).packInt(1).packArrayHeader(300_000_000)
          .packString("w1");
      b.sync.apply(p.toByteArray());
    }
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(4).packInt(ReplicaSync.ENVOYS).packLong(6).packInt(-1).packArrayHeader(1).packString("w1");
      b.sync.apply(p.toByteArray());
    }
    assertThat(b.sync.malformed()).isEqualTo(2);
    assertThat(b.sync.peerCount()).isZero();
    assertThat(b.gate.missing(FLEET)).isEmpty();
    assertThat(b.outbox).isEmpty();
  }

  /**
   * The split deployment: Envoy's xDS stream goes to an {@code xds}-mode process and its ext_proc requests to
   * routers in {@code ext-proc} mode, whose own process hears no Envoy. The xds process joins the link as a member
   * that only shares its Envoys' view, and the routers hold back what those Envoys lack. It tells a router heard for
   * the first time its view and asks for the router's; a sync request gets its view alone (it has no load).
   */
  @Test
  void anXdsProcessTellsRoutersWhatItsEnvoysHoldAndTheyGateOnIt() {
    Replica xds = new Replica(1, true, false);
    Replica router = new Replica(2);
    assertThat(xds.sync.viewOnly()).isTrue();
    xds.envoysHold(1, "w1", "w2", "w3");
    xds.outbox.clear(); // nobody was listening yet
    router.ledger.reserve(W, 10, new long[] {1}, 0);
    router.outbox.clear();

    xds.sync.heartbeat();
    assertThat(xds.outbox).extracting(ReplicaSyncTest::kind).containsExactly(ReplicaSync.HEARTBEAT,
        ReplicaSync.ENVOYS);
    xds.deliverTo(router);
    assertThat(router.gate.missing(FLEET)).containsExactly("w4");
    assertThat(router.gate.holds(worker("w1"))).isTrue();
    assertThat(router.sync.peerCount()).as("a member of the link, heard").isEqualTo(1);

    router.deliverTo(xds); // its reservation, turns and sync request: the xds process hears it for the first time
    assertThat(xds.outbox).as("to a member heard for the first time, and on its sync request: the view only")
        .extracting(ReplicaSyncTest::kind)
        .containsExactly(ReplicaSync.ENVOYS, ReplicaSync.HEARTBEAT, ReplicaSync.SYNC_REQUEST, ReplicaSync.ENVOYS,
            ReplicaSync.HEARTBEAT);
    xds.outbox.clear();

    xds.envoysHold(2, "w1", "w2", "w3", "w4");
    xds.deliverTo(router);
    assertThat(router.gate.missing(FLEET)).isEmpty();
    assertThat(router.sync.malformed()).isZero();
    assertThat(xds.sync.malformed()).isZero();
  }

  /**
   * An xds process has no ledger: every kind of the routers' messages is read, checked and dropped, nothing of it is
   * kept (copies, turns, predictions, other Envoys' views), and a router that goes silent is dropped as ever.
   */
  @Test
  void anXdsProcessKeepsNothingOfTheRoutersLoadAndForgetsThemWhenSilent() throws Exception {
    Replica xds = new Replica(1, true, false);
    Replica router = new Replica(2, true);
    router.envoysHold(1, "w1");
    for (int i = 0; i < 1000; i++) {
      Reservation r = router.ledger.reserve(new WorkerId("w" + (1 + i % 4), 0), 100, new long[] {i, i + 1}, 1);
      router.sync.sharing(router.index).recordPrediction(W, new long[] {i}); // not the reservation's: sent alone
      if (i % 2 == 0) {
        router.ledger.prefillDone(r);
      } else if (i % 3 == 0) {
        router.ledger.release(r);
      }
    }
    router.sync.heartbeat();
    router.deliverTo(xds);
    assertThat(xds.sync.applied()).isGreaterThan(2000);
    assertThat(xds.sync.malformed()).isZero();
    assertThat(xds.sync.copies()).as("reservations kept").isZero();
    assertThat(xds.ledger.liveReservations()).isZero();
    assertThat(xds.ledger.lastTurns()).isEmpty();
    assertThat(xds.predictions).isEmpty();
    assertThat(xds.gate.peersKnowingEnvoys()).as("a router's Envoys are the routers' to apply").isZero();
    assertThat(xds.gate.missing(FLEET)).isEmpty();
    assertThat(xds.outbox).extracting(ReplicaSyncTest::kind).containsOnly(ReplicaSync.ENVOYS,
        ReplicaSync.SYNC_REQUEST, ReplicaSync.HEARTBEAT);
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(3).packInt(ReplicaSync.TURNS).packLong(9).packArrayHeader(300_000_000).packString("w7");
      xds.sync.apply(p.toByteArray());
    }
    byte[] huge = reserveClaimingHashBytes(0x7FFF_FFF8);
    assertThat(org.assertj.core.api.Assertions.catchThrowable(() -> xds.sync.apply(huge))).isNull();
    assertThat(xds.sync.malformed()).isEqualTo(2);
    assertThat(xds.sync.peerCount()).as("a malformed message makes no peer here either").isEqualTo(1);

    now.addAndGet(TimeUnit.SECONDS.toNanos(4));
    assertThat(xds.sync.expireSilent()).isEqualTo(1);
    assertThat(xds.sync.peerCount()).isZero();
  }

  /** A member that only shares a view has one: without an xDS server there is nothing to share. */
  @Test
  void aViewOnlyMemberNeedsAnXdsServersView() {
    EnvoyGate none = new EnvoyGate(null, () -> FLEET);
    assertThat(org.assertj.core.api.Assertions.catchThrowable(() -> ReplicaSync.viewOnly(1, m -> { }, now::get,
        TimeUnit.SECONDS.toNanos(3), none))).isInstanceOf(IllegalArgumentException.class);
  }

  private static int kind(byte[] message) {
    try (org.msgpack.core.MessageUnpacker u = MessagePack.newDefaultUnpacker(message)) {
      u.unpackArrayHeader();
      return u.unpackInt();
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }
}
