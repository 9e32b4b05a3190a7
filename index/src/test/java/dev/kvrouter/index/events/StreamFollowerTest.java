package dev.kvrouter.index.events;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.TestClock;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.WorkerView;
import dev.kvrouter.index.wire.AllBlocksCleared;
import dev.kvrouter.index.wire.BlockRemoved;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.EventBatch;
import dev.kvrouter.index.wire.EventDecoder;
import dev.kvrouter.index.wire.EventEncoder;
import dev.kvrouter.index.wire.KvEvent;
import dev.kvrouter.index.wire.WireLayout;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/** The sequence/replay protocol without sockets: a fake engine keeps a replay buffer the follower can ask. */
class StreamFollowerTest {

  private static final int BS = 4;
  private final TestClock clock = new TestClock(1_757_500_000_000L);
  private final KvIndex index = new KvIndex(IndexConfig.defaults(), clock);
  private final WorkerId w = new WorkerId("w", 1);
  private final List<String> staleEvents = new ArrayList<>();
  private final EventPlaneHealth health =
      new EventPlaneHealth(new SimpleMeterRegistry(), clock, Duration.ofSeconds(30));
  private final WorkerView view = index.register(w);
  private final WorkerEventHealth h;
  private final TreeMap<Long, byte[]> buffer = new TreeMap<>();
  private final EventEncoder encoder = new EventEncoder(WireLayout.VLLM_MAP);
  private boolean replayWorks = true;
  private int replays;
  private long seq;
  private int blocks;

  StreamFollowerTest() {
    health.addListener((id, s, reason) -> staleEvents.add((s ? "stale: " : "fresh: ") + reason));
    h = health.register(view);
  }

  private StreamFollower follower(boolean withReplay) {
    EventApplier applier = new EventApplier(view, "m", BS, h);
    StreamFollower.Replayer replayer = (from, sink) -> {
      replays++;
      if (!replayWorks) {
        return false;
      }
      buffer.tailMap(from, true).forEach(sink::accept);
      return true;
    };
    return new StreamFollower(applier, h, new EventDecoder(), withReplay ? replayer : null, clock, 1);
  }

  /** The engine publishes a batch storing one new root block; returns (seq, payload). */
  private Object[] next(KvEvent... extra) {
    List<KvEvent> events = new ArrayList<>();
    int b = blocks++;
    int[] t = new int[BS];
    for (int i = 0; i < BS; i++) {
      t[i] = b * 100 + i;
    }
    events.add(BlockStored.of(new long[] {1000 + b}, null, t, BS, "GPU"));
    events.addAll(List.of(extra));
    byte[] p = encoder.encode(EventBatch.of(clock.millis() / 1000.0 - 0.25, 1, events));
    long s = seq++;
    buffer.put(s, p);
    return new Object[] {s, p};
  }

  private static void deliver(StreamFollower f, Object[] m) {
    f.onLive((Long) m[0], (byte[]) m[1]);
  }

  @Test
  void inOrderStreamAppliesEverything() {
    StreamFollower f = follower(false);
    for (int i = 0; i < 5; i++) {
      deliver(f, next());
    }
    assertThat(view.size()).isEqualTo(5);
    assertThat(h.count(EventCounter.BATCHES)).isEqualTo(5);
    assertThat(h.lastSeq()).isEqualTo(4);
    assertThat(h.lagMillis()).isEqualTo(250);
    assertThat(h.stale()).isFalse();
  }

  @Test
  void gapIsFilledByReplay() {
    StreamFollower f = follower(true);
    deliver(f, next());
    deliver(f, next());
    next();
    next();
    deliver(f, next());
    assertThat(view.size()).isEqualTo(5);
    assertThat(h.count(EventCounter.GAPS)).isEqualTo(1);
    assertThat(h.count(EventCounter.REPLAYS)).isEqualTo(1);
    assertThat(h.count(EventCounter.DROPPED_BATCHES)).isZero();
    assertThat(h.stale()).isFalse();
  }

  @Test
  void gapWithoutReplayMakesTheViewStaleUntilTheEngineClears() {
    StreamFollower f = follower(false);
    deliver(f, next());
    next();
    next();
    deliver(f, next());
    assertThat(h.stale()).isTrue();
    assertThat(view.stale()).isTrue();
    assertThat(index.lookup(new long[] {0}, 0).size()).isZero();
    assertThat(h.count(EventCounter.DROPPED_BATCHES)).isEqualTo(2);
    assertThat(health.staleWorkers()).containsExactly(w);
    deliver(f, next(AllBlocksCleared.INSTANCE)); // its own store precedes the clear
    assertThat(h.stale()).isFalse();
    assertThat(view.size()).isZero();
    assertThat(staleEvents).hasSize(2).last().asString().startsWith("fresh");
  }

  @Test
  void replayThatFailsOrFallsShortLeavesTheViewStale() {
    StreamFollower f = follower(true);
    deliver(f, next());
    next();
    Object[] lostFromBuffer = next();
    buffer.remove((Long) lostFromBuffer[0]);
    deliver(f, next());
    assertThat(h.stale()).isTrue();
    assertThat(h.count(EventCounter.DROPPED_BATCHES)).isEqualTo(1);
    assertThat(view.size()).isEqualTo(3);
    replayWorks = false;
    next();
    deliver(f, next());
    assertThat(h.count(EventCounter.REPLAY_FAILURES)).isEqualTo(1);
    assertThat(h.count(EventCounter.DROPPED_BATCHES)).isEqualTo(2);
  }

  @Test
  void sequenceGoingBackwardsIsARestart() {
    StreamFollower f = follower(false);
    for (int i = 0; i < 4; i++) {
      deliver(f, next());
    }
    seq = 0;
    buffer.clear();
    deliver(f, next());
    assertThat(h.count(EventCounter.RESETS)).isEqualTo(1);
    assertThat(index.cacheResets()).as("a restarted engine's cache is empty").isEqualTo(1);
    assertThat(view.size()).as("cleared, then the new lifetime's first store").isEqualTo(1);
    assertThat(h.lastSeq()).isZero();
  }

  @Test
  void lateJoinReplaysFromZero() {
    next();
    next();
    StreamFollower f = follower(true);
    deliver(f, next());
    assertThat(view.size()).isEqualTo(3);
    assertThat(replays).isEqualTo(1);
    // complete lifetime: an unknown parent is now unexpected and marks the view stale
    byte[] orphan = encoder.encode(EventBatch.of(1.0, 1,
        List.of(BlockStored.of(new long[] {77}, 5555L, new int[] {1, 2, 3, 4}, BS, "GPU"))));
    buffer.put(seq, orphan);
    f.onLive(seq++, orphan);
    assertThat(h.count(EventCounter.UNKNOWN_PARENT)).isEqualTo(1);
    assertThat(h.stale()).isTrue();
  }

  @Test
  void lateJoinWithoutReplayIsIncompleteButNotStale() {
    next();
    StreamFollower f = follower(false);
    deliver(f, next());
    byte[] orphan = encoder.encode(EventBatch.of(1.0, 1,
        List.of(BlockStored.of(new long[] {77}, 1000L, new int[] {1, 2, 3, 4}, BS, "GPU"))));
    f.onLive(seq++, orphan);
    assertThat(h.count(EventCounter.UNKNOWN_PARENT)).isEqualTo(1);
    assertThat(h.stale()).as("a late joiner expects unknown parents").isFalse();
  }

  @Test
  void malformedBatchIsCountedDroppedAndMakesTheViewStale() {
    StreamFollower f = follower(false);
    deliver(f, next());
    f.onLive(seq++, new byte[] {(byte) 0xc1, 1, 2});
    deliver(f, next());
    assertThat(h.count(EventCounter.MALFORMED)).isEqualTo(1);
    assertThat(h.count(EventCounter.DROPPED_BATCHES)).isEqualTo(1);
    assertThat(h.stale()).isTrue();
    assertThat(view.size()).isEqualTo(2);
    assertThat(h.count(EventCounter.DP_RANK_MISMATCH)).isZero();
  }

  @Test
  void staleRecoversAfterAQuietPeriod() {
    StreamFollower f = follower(false);
    deliver(f, next());
    next();
    deliver(f, next());
    assertThat(h.stale()).isTrue();
    clock.advance(29_999);
    h.tick(clock.millis());
    assertThat(h.stale()).isTrue();
    clock.advance(1);
    h.tick(clock.millis());
    assertThat(h.stale()).isFalse();
    assertThat(view.stale()).isFalse();
  }

  @Test
  void liveMessagesAReplayAlreadyAppliedAreSkippedNotRestarts() {
    StreamFollower f = follower(true);
    deliver(f, next());
    next();
    Object[] two = next();
    Object[] three = next(); // published before the follower sees seq 2, so replay returns it too
    deliver(f, two);
    assertThat(h.lastSeq()).isEqualTo(3);
    deliver(f, three);
    assertThat(h.count(EventCounter.RESETS)).isZero();
    assertThat(h.count(EventCounter.BATCHES)).isEqualTo(4);
    assertThat(view.size()).isEqualTo(4);
    deliver(f, next());
    assertThat(view.size()).isEqualTo(5);
  }

  @Test
  void removesAfterAGapStillApply() {
    StreamFollower f = follower(false);
    deliver(f, next());
    deliver(f, next(BlockRemoved.of("GPU", 1000)));
    assertThat(view.size()).isEqualTo(1);
    assertThat(h.count(EventCounter.REMOVED_BLOCKS)).isEqualTo(1);
  }
}
