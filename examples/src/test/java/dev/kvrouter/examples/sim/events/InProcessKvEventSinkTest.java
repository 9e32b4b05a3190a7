package dev.kvrouter.examples.sim.events;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.sim.clock.VirtualClock;
import dev.kvrouter.index.wire.BlockRemoved;
import dev.kvrouter.index.wire.EventBatch;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class InProcessKvEventSinkTest {

  private final VirtualClock clock = new VirtualClock();
  private final List<SequencedKvEventBatch> got = new ArrayList<>();
  private final List<Long> at = new ArrayList<>();
  private final InProcessKvEventSink sink = new InProcessKvEventSink(clock, 11, b -> {
    got.add(b);
    at.add(clock.nanoTime());
  });

  private static EventBatch batch(int i) {
    return EventBatch.of(i, 0, List.of(BlockRemoved.of("GPU", i)));
  }

  private List<Long> seqs() {
    return got.stream().map(SequencedKvEventBatch::seq).toList();
  }

  @Test
  void numbersBatchesFromZero() {
    for (int i = 0; i < 3; i++) {
      sink.publish(batch(i));
    }
    assertThat(seqs()).containsExactly(0L, 1L, 2L);
  }

  @Test
  void droppedBatchesLeaveAGap() {
    sink.setFaults(new EventFaults(1.0, 0, 0, false));
    sink.publish(batch(0));
    sink.setFaults(EventFaults.NONE);
    sink.publish(batch(1));
    assertThat(seqs()).containsExactly(1L);
    assertThat(sink.dropped()).isEqualTo(1);
  }

  @Test
  void dropRateIsRoughlyHonouredAndSeeded() {
    sink.setFaults(new EventFaults(0.3, 0, 0, false));
    for (int i = 0; i < 2000; i++) {
      sink.publish(batch(i));
    }
    assertThat(sink.dropped()).isBetween(500L, 700L);
    InProcessKvEventSink again = new InProcessKvEventSink(clock, 11, b -> {});
    again.setFaults(new EventFaults(0.3, 0, 0, false));
    for (int i = 0; i < 2000; i++) {
      again.publish(batch(i));
    }
    assertThat(again.dropped()).isEqualTo(sink.dropped());
  }

  @Test
  void aStoppedPublisherIsSilentThenShowsAGap() {
    sink.publish(batch(0));
    sink.setFaults(new EventFaults(0, 0, 0, true));
    sink.publish(batch(1));
    sink.setFaults(EventFaults.NONE);
    sink.publish(batch(2));
    assertThat(seqs()).containsExactly(0L, 2L);
  }

  @Test
  void wireRoundTripGivesWhatASubscriberWouldDecode() {
    List<SequencedKvEventBatch> vllm = new ArrayList<>();
    InProcessKvEventSink s = new InProcessKvEventSink(clock, 1, dev.kvrouter.index.wire.WireLayout.VLLM_MAP, 0,
        vllm::add);
    dev.kvrouter.index.wire.BlockStored stored = new dev.kvrouter.index.wire.BlockStored(new long[] {-5L}, null,
        new int[] {1, 2}, 2, null, "GPU", null, List.of(List.<Object>of("salt")), 0, "full_attention", null, null,
        null, null, "salt");
    s.publish(EventBatch.of(1.5, 0, List.of(stored)));
    dev.kvrouter.index.wire.BlockStored got = (dev.kvrouter.index.wire.BlockStored) vllm.get(0).batch().events()
        .get(0);
    assertThat(got.blockHashes()).containsExactly(-5L);
    assertThat(got.cacheSalt()).isNull(); // not a vLLM field: the salt travels in extra_keys
    assertThat(got.extraKeys()).containsExactly(List.<Object>of("salt"));
  }

  @Test
  void delayedBatchesArriveLaterInOrder() {
    sink.setFaults(new EventFaults(0, 250, 0, false));
    sink.publish(batch(0));
    sink.publish(batch(1));
    assertThat(got).isEmpty();
    clock.runUntilIdle(100);
    assertThat(seqs()).containsExactly(0L, 1L);
    assertThat(at).containsExactly(250_000_000L, 250_000_000L);
  }

  @Test
  void reorderedBatchIsDeliveredAfterTheNextOne() {
    sink.setFaults(new EventFaults(0, 0, 1.0, false));
    sink.publish(batch(0)); // held
    sink.publish(batch(1)); // delivered, then the held one (a second hold waits for the first to go)
    assertThat(seqs()).containsExactly(1L, 0L);
  }

  @Test
  void aHeldBatchWithNoSuccessorIsFlushedAfterAShortHold() {
    sink.setFaults(new EventFaults(0, 0, 1.0, false));
    sink.publish(batch(0));
    assertThat(got).isEmpty();
    clock.runUntilIdle(100);
    assertThat(seqs()).containsExactly(0L);
  }

  @Test
  void crashLosesInFlightBatchesAndRestartNumbersFromZero() {
    sink.setFaults(new EventFaults(0, 100, 0, false));
    sink.publish(batch(0));
    sink.publish(batch(1));
    sink.crashed();
    sink.publish(batch(2)); // a dead process publishes nothing
    sink.restart();
    sink.setFaults(EventFaults.NONE);
    sink.publish(batch(3));
    clock.runUntilIdle(100);
    assertThat(seqs()).containsExactly(0L);
    assertThat(got.get(0).batch().ts()).isEqualTo(3.0);
  }

  @Test
  void replayReturnsBufferedBatchesIncludingDroppedOnes() {
    InProcessKvEventSink s = new InProcessKvEventSink(clock, 1, null, 3, got::add);
    s.publish(batch(0));
    s.setFaults(new EventFaults(1.0, 0, 0, false));
    s.publish(batch(1)); // dropped on the wire, still buffered
    s.setFaults(EventFaults.NONE);
    s.publish(batch(2));
    s.publish(batch(3));
    assertThat(seqsOf(s.replay(1))).containsExactly(1L, 2L, 3L);
    assertThat(seqsOf(s.replay(0))).containsExactly(1L, 2L, 3L); // seq 0 fell out of the 3-batch buffer
    s.setReplayEnabled(false);
    assertThat(s.replay(0)).isEmpty();
    s.setReplayEnabled(true);
    s.crashed();
    s.restart();
    assertThat(s.replay(0)).isEmpty();
  }

  private static List<Long> seqsOf(List<SequencedKvEventBatch> l) {
    return l.stream().map(SequencedKvEventBatch::seq).toList();
  }
}
