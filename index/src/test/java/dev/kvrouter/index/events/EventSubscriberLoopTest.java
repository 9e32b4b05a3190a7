package dev.kvrouter.index.events;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.KvEventPublisher;
import dev.kvrouter.index.wire.PublisherConfig;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The event thread's loop over its sockets: waking for commands, serving every socket within its budget. */
@Timeout(90)
class EventSubscriberLoopTest {

  private static final int BS = 4;
  private final List<AutoCloseable> closeables = new ArrayList<>();
  private final KvIndex index = new KvIndex(IndexConfig.defaults(), Clock.systemUTC());
  private final EventPlaneHealth health =
      new EventPlaneHealth(new SimpleMeterRegistry(), Clock.systemUTC(), Duration.ZERO);
  private EventSubscriber sub;
  private long nextHash = 1;

  @AfterEach
  void close() throws Exception {
    if (sub != null) {
      sub.close();
    }
    for (AutoCloseable c : closeables) {
      c.close();
    }
  }

  /** One shard, so every source shares one event thread and one wait. */
  private EventSubscriber start(int pollMillis, int receiveBudget) {
    SubscriberConfig d = SubscriberConfig.defaults();
    sub = new EventSubscriber(index, health, new SubscriberConfig(1, pollMillis, d.replayTimeoutMillis(),
        d.maxReplayBatches(), d.reconnectMillis(), d.reconnectMaxMillis(), 10_000, d.tickMillis(), receiveBudget,
        d.handshakeMillis(), d.maxMessageBytes()), Clock.systemUTC(), r -> {
          Thread t = new Thread(r, "kv-events-loop-test");
          t.setDaemon(true);
          return t;
        });
    sub.start();
    return sub;
  }

  private KvEventPublisher publisher() {
    KvEventPublisher p = KvEventPublisher.start(
        PublisherConfig.vllm("tcp://127.0.0.1:*").withBind(true).withQueue(100_000, 100_000));
    closeables.add(p);
    return p;
  }

  private void publish(KvEventPublisher p, int batches) {
    for (int i = 0; i < batches; i++) {
      p.publish(List.of(BlockStored.of(new long[] {nextHash++}, null, new int[] {1, 2, 3, (int) nextHash}, BS,
          "GPU")));
    }
    p.flush(Duration.ofSeconds(20));
  }

  private long batches(WorkerId w) {
    // null until the shard has applied the add
    WorkerEventHealth h = health.get(w);
    return h == null ? 0 : h.count(EventCounter.BATCHES);
  }

  /** Publishes until {@code w} has applied a batch: its connection and subscription are up. */
  private void connected(KvEventPublisher p, WorkerId w) throws InterruptedException {
    await(() -> {
      publish(p, 1);
      long deadline = System.nanoTime() + Duration.ofMillis(300).toNanos();
      while (System.nanoTime() < deadline && batches(w) == 0) {
        Thread.onSpinWait();
      }
      return batches(w) > 0;
    }, w + " follows");
  }

  /** One shard following one engine that has sent a batch and is now quiet: the shard waits on its socket. */
  private void followOneQuietEngine(int pollMillis) throws InterruptedException {
    start(pollMillis, 1024);
    KvEventPublisher a = publisher();
    WorkerId wa = WorkerId.of("a");
    sub.add(EventSource.connect(wa, "m", BS, a.endpoint(), null));
    connected(a, wa);
    Thread.sleep(100);
  }

  private static void await(BooleanSupplier condition, String what) throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out waiting until " + what);
      }
      Thread.sleep(5);
    }
  }

  /**
   * A command wakes a shard that waits on its sockets: with {@code pollMillis} a minute, a new source is followed
   * (and {@link EventSubscriber#sync} returns) at once. Before, the shard sat in JeroMQ's poll, which an unpark
   * does not end, for up to {@code pollMillis}.
   */
  @Test
  void aCommandWakesAShardWaitingOnItsSockets() throws Exception {
    followOneQuietEngine(60_000);
    KvEventPublisher b = publisher();
    sub.add(EventSource.connect(WorkerId.of("b"), "m", BS, b.endpoint(), null));
    long start = System.nanoTime();
    sub.sync(Duration.ofSeconds(30));

    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(5));
  }

  /**
   * A socket with a backlog far beyond the receive budget (an engine flooding, or a backlog after a stall) gets a
   * budget per pass, so another worker's batch is applied long before the backlog is; and the backlog is read to
   * its end although nothing new arrives to signal its socket again.
   */
  @Test
  void aFloodedSocketIsReadInBudgetsWithoutStarvingTheOthers() throws Exception {
    int budget = 1;
    int flood = 2_000;
    start(20, budget);
    KvEventPublisher a = publisher();
    KvEventPublisher b = publisher();
    WorkerId wa = WorkerId.of("a");
    WorkerId wb = WorkerId.of("b");
    EventSource sa = EventSource.connect(wa, "m", BS, a.endpoint(), null);
    sub.add(sa);
    sub.add(EventSource.connect(wb, "m", BS, b.endpoint(), null));
    connected(a, wa);
    connected(b, wb);
    long a0 = batches(wa);
    long b0 = batches(wb);

    // hold the event thread while both backlogs reach its sockets
    CountDownLatch hold = new CountDownLatch(1);
    CountDownLatch held = new CountDownLatch(1);
    sub.runOnShardOf(sa, () -> {
      held.countDown();
      try {
        hold.await(60, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    assertThat(held.await(10, TimeUnit.SECONDS)).isTrue();
    publish(a, flood);
    publish(b, 1);
    Thread.sleep(1000);
    hold.countDown();
    // spun, not slept: each pass applies one of a's batches, so a sleeping wait would see far more of them
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (batches(wb) == b0) {
      assertThat(System.nanoTime()).as("b's batch applied within 30 s").isLessThan(deadline);
      Thread.onSpinWait();
    }
    long aWhenB = batches(wa) - a0;

    assertThat(aWhenB).as("a's batches applied before b's one").isLessThan(flood / 2);
    await(() -> batches(wa) - a0 == flood, "a's backlog is read to its end");
    assertThat(health.get(wa).count(EventCounter.GAPS)).isZero();
  }

  /**
   * A shard whose sockets stay quiet backs off its passes to one every 4 ms: each pass reads every socket, so a
   * fixed 1 ms rest cost 64 idle workers more than JeroMQ's poll did. A pass after a read comes at once.
   */
  @Test
  void quietSocketsAreReadLessOften() throws Exception {
    followOneQuietEngine(20);
    long before = sub.polls();
    Thread.sleep(1000);
    long passes = sub.polls() - before;

    // 250 at the 4 ms rest; 1,000 at a fixed 1 ms rest (fewer only when parks overshoot)
    assertThat(passes).isBetween(1L, 400L);
  }
}
