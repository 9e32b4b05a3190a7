package dev.kvrouter.index.events;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.KvIndexMetrics;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.KvEventPublisher;
import dev.kvrouter.index.wire.PublisherConfig;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.net.ServerSocket;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

@Timeout(90)
class EventSubscriberTest {

  private static final int BS = 4;
  /** An endpoint ZMQ refuses at connect, at once and without DNS (no port). */
  private static final String UNCONNECTABLE = "tcp://127.0.0.1";
  private final List<AutoCloseable> closeables = new ArrayList<>();
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private final KvIndex index = new KvIndex(IndexConfig.defaults(), Clock.systemUTC());
  private final EventPlaneHealth health = new EventPlaneHealth(registry, Clock.systemUTC(), Duration.ZERO);
  private final EventSubscriber sub = new EventSubscriber(index, health, SubscriberConfig.defaults().withShards(2),
      Clock.systemUTC(), EventSubscriberTest::daemon);
  private long nextHash = 1;

  private static Thread daemon(Runnable r) {
    Thread t = new Thread(r, "kv-events-test");
    t.setDaemon(true);
    return t;
  }

  @AfterEach
  void close() throws Exception {
    sub.close();
    for (AutoCloseable c : closeables) {
      c.close();
    }
  }

  private KvEventPublisher publisher(PublisherConfig cfg) {
    KvEventPublisher p = KvEventPublisher.start(cfg);
    closeables.add(p);
    return p;
  }

  /**
   * Publishes one-block stores, one at a time, until {@code worker}'s view has {@code blocks} blocks. Each
   * store is republished only if it did not arrive within 500 ms (lost before the subscription propagated),
   * so the view does not overshoot.
   */
  private void publishUntil(KvEventPublisher p, WorkerId worker, int blocks) throws InterruptedException {
    await(() -> {
      int before = index.view(worker) == null ? 0 : index.view(worker).size();
      p.publish(List.of(BlockStored.of(new long[] {nextHash++}, null, new int[] {1, 2, 3, (int) nextHash}, BS,
          "GPU")));
      p.flush(Duration.ofSeconds(5));
      long deadline = System.nanoTime() + Duration.ofMillis(500).toNanos();
      while (System.nanoTime() < deadline && (index.view(worker) == null || index.view(worker).size() == before)) {
        LockSupport.parkNanos(1_000_000);
      }
      return index.view(worker) != null && index.view(worker).size() >= blocks;
    }, worker + " reaches " + blocks + " blocks");
  }

  /** Publishes from {@code stray}, whose topic no source has, until the subscriber counts it unroutable. */
  private void publishUntilUnroutable(KvEventPublisher stray) throws InterruptedException {
    await(() -> {
      stray.publish(List.of(BlockStored.of(new long[] {5}, null, new int[] {9, 9, 9, 9}, BS, "GPU")));
      stray.flush(Duration.ofSeconds(5));
      return sub.unroutableMessages() > 0;
    }, "stray topic counted");
  }

  private static void await(BooleanSupplier condition, String what) throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out waiting until " + what);
      }
      Thread.sleep(10);
    }
  }

  private boolean hasMeter(String name, WorkerId w) {
    for (Meter m : registry.getMeters()) {
      if (m.getId().getName().equals(name) && w.name().equals(m.getId().getTag("worker"))) {
        return true;
      }
    }
    return false;
  }

  /**
   * One engine message is held whole in memory, up to the receive high-water mark of them: a message larger than
   * any engine sends (here a medium string of 17 MiB) must not be read. ZMQ drops the connection instead and
   * reconnects; the message is counted as oversize, and the batches it carried are lost as after a gap.
   */
  @Test
  void aMessageOverTheSizeLimitIsNotReadAndIsCounted() throws Exception {
    sub.start();
    KvEventPublisher p = publisher(PublisherConfig.vllm("tcp://127.0.0.1:*").withBind(true));
    WorkerId w = WorkerId.of("big");
    sub.add(EventSource.connect(w, "m", BS, p.endpoint(), null));
    publishUntil(p, w, 1);
    String huge = "x".repeat(SubscriberConfig.DEFAULT_MAX_MESSAGE_BYTES + (1 << 20));
    p.publish(List.of(BlockStored.of(new long[] {nextHash++}, null, new int[] {1, 2, 3, 4}, BS, huge)));
    p.flush(Duration.ofSeconds(5));
    huge = null;
    publishUntil(p, w, 2);
    WorkerEventHealth h = health.get(w);
    assertThat(h.count(EventCounter.SKIPPED_MEDIUM)).as("the oversize batch was never read").isZero();
    await(() -> h.count(EventCounter.OVERSIZE) == 1, "the oversize message is counted");
    assertThat(h.count(EventCounter.DROPPED_BATCHES)).isPositive();
  }

  @Test
  void reconcileAddsRemovesAndRestartsSources() throws Exception {
    sub.start();
    KvEventPublisher pa = publisher(PublisherConfig.vllm("tcp://127.0.0.1:*").withBind(true));
    KvEventPublisher pb = publisher(PublisherConfig.vllm("tcp://127.0.0.1:*").withBind(true));
    WorkerId a = WorkerId.of("a");
    WorkerId b = WorkerId.of("b");
    EventSource sa = EventSource.connect(a, "m", BS, pa.endpoint(), null);
    EventSource sb = EventSource.connect(b, "m", BS, pb.endpoint(), null);
    sub.reconcile(List.of(sa, sb));
    publishUntil(pa, a, 3);
    publishUntil(pb, b, 2);
    assertThat(hasMeter("kvrouter.events.applied", b)).isTrue();

    // b goes away, a changes (new topic): b is purged, a restarts from an empty view
    EventSource sa2 = new EventSource(a, "m", BS, pa.endpoint(), null, "x", false);
    sub.reconcile(List.of(sa2));
    sub.sync(Duration.ofSeconds(10));
    assertThat(index.view(b)).as("b purged").isNull();
    assertThat(hasMeter("kvrouter.events.applied", b)).as("b's meters removed").isFalse();
    assertThat(index.view(a).size()).as("a restarted empty").isZero();
    assertThat(sub.sources()).containsOnlyKeys(a);
    // a's new topic filter "x" drops the publisher's "" topic: nothing arrives
    pa.publish(List.of(BlockStored.of(new long[] {999}, null, new int[] {1, 2, 3, 4}, BS, "GPU")));
    pa.flush(Duration.ofSeconds(5));
    Thread.sleep(200);
    assertThat(index.view(a).size()).isZero();
    // reconciling with the same set changes nothing
    sub.reconcile(List.of(sa2));
    sub.sync(Duration.ofSeconds(10));
    assertThat(index.view(a)).isNotNull();
  }

  @Test
  void bindModeSharesOneSocketAndRoutesByTopic() throws Exception {
    sub.start();
    String endpoint = "tcp://127.0.0.1:" + freePort();
    WorkerId a = WorkerId.of("pod-a");
    WorkerId b = WorkerId.of("pod-b");
    sub.add(new EventSource(a, "m", BS, endpoint, null, "kv@pod-a@m", true));
    sub.add(new EventSource(b, "m", BS, endpoint, null, "kv@pod-b@m", true));
    sub.sync(Duration.ofSeconds(10));
    // engines connect to the router (llm-d style)
    KvEventPublisher pa = publisher(PublisherConfig.vllm(endpoint).withBind(false).withTopic("kv@pod-a@m"));
    KvEventPublisher pb = publisher(PublisherConfig.vllm(endpoint).withBind(false).withTopic("kv@pod-b@m"));
    KvEventPublisher stray = publisher(PublisherConfig.vllm(endpoint).withBind(false).withTopic("kv@pod-a@m2"));
    publishUntil(pa, a, 2);
    publishUntil(pb, b, 3);
    assertThat(index.view(a).size()).isEqualTo(2);
    // a topic that matches a's subscription prefix but no source exactly is counted, not misapplied
    publishUntilUnroutable(stray);
    assertThat(index.view(a).size()).isEqualTo(2);
    assertThat(health.get(a).count(EventCounter.RECEIVED)).isEqualTo(health.get(a).count(EventCounter.BATCHES));
  }

  /**
   * A replay that makes slow progress (an engine answering each request with one batch, then pausing) goes on for
   * up to max_replay_batches requests. close() waited 5 s for the shard, which never looked up from the replay,
   * then closed the ZMQ context under the still running thread. A replay now stops between requests once the
   * subscriber is closing.
   */
  @Test
  void closeDoesNotWaitOutAReplayThatTrickles() throws Exception {
    sub.start();
    KvEventPublisher p = publisher(PublisherConfig.vllm("tcp://127.0.0.1:*").withBind(true));
    ZContext zmq = new ZContext(1);
    ZMQ.Socket router = zmq.createSocket(SocketType.ROUTER);
    router.setLinger(0);
    int port = router.bindToRandomPort("tcp://127.0.0.1");
    AtomicInteger requests = new AtomicInteger();
    // one batch per request, then nothing until asked again
    Thread engine = ReplayClientTest.serve(router, requests,
        (id, from) -> ReplayClientTest.reply(router, id, from, new byte[] {(byte) 0x92, 0, (byte) 0x90}));
    closeables.add(() -> {
      engine.interrupt();
      engine.join(5000);
    });
    closeables.add(zmq);
    WorkerId w = WorkerId.of("w");
    sub.add(EventSource.connect(w, "m", BS, p.endpoint(), "tcp://127.0.0.1:" + port));
    // the first batch seen has seq > 0, so the router asks for a replay from 0
    await(() -> {
      p.publish(List.of(BlockStored.of(new long[] {nextHash++}, null, new int[] {1, 2, 3, 4}, BS, "GPU")));
      p.flush(Duration.ofSeconds(5));
      return requests.get() >= 2;
    }, "the replay is asked again");

    long start = System.nanoTime();
    sub.close();
    assertThat(Duration.ofNanos(System.nanoTime() - start)).as("close").isLessThan(Duration.ofMillis(4500));
  }

  /**
   * On a bound socket any engine may connect, and ZMQ filters topics by prefix. With one source left on it (the
   * others removed from the fleet, or only one configured) its messages were taken without the exact topic check,
   * so an engine whose topic extends that source's was applied to that source's view: blocks it never held, and
   * two interleaved sequences read as restarts.
   */
  @Test
  void aBoundSocketWithOneSourceStillRoutesByExactTopic() throws Exception {
    sub.start();
    String endpoint = "tcp://127.0.0.1:" + freePort();
    WorkerId a = WorkerId.of("pod-a");
    sub.add(new EventSource(a, "m", BS, endpoint, null, "kv@pod-a@m", true));
    sub.sync(Duration.ofSeconds(10));
    KvEventPublisher pa = publisher(PublisherConfig.vllm(endpoint).withBind(false).withTopic("kv@pod-a@m"));
    KvEventPublisher stray = publisher(PublisherConfig.vllm(endpoint).withBind(false).withTopic("kv@pod-a@m2"));
    publishUntil(pa, a, 2);
    publishUntilUnroutable(stray);
    assertThat(index.view(a).size()).isEqualTo(2);
    assertThat(health.get(a).count(EventCounter.RESETS)).isZero();
  }

  /**
   * A stale worker's removal tells the listeners it is no longer stale. A listener that threw there (the router's
   * own bug, say) ended the removal before the purge: the worker left the subscriber and its meters, but its view,
   * blocks and ordinal stayed in the index for good. Listeners' failures are contained as on every other change.
   */
  @Test
  void aStaleListenerThatThrowsDoesNotKeepARemovedWorkerInTheIndex() throws Exception {
    health.addListener((worker, stale, reason) -> {
      throw new IllegalStateException("a listener's bug");
    });
    sub.start();
    KvEventPublisher p = publisher(PublisherConfig.vllm("tcp://127.0.0.1:*").withBind(true));
    WorkerId w = WorkerId.of("w");
    sub.add(EventSource.connect(w, "m", BS, p.endpoint(), null));
    publishUntil(p, w, 2);
    p.dropNext(1); // a gap without replay: stale
    publishUntil(p, w, 3);
    assertThat(health.get(w).stale()).isTrue();

    sub.remove(w);
    sub.sync(Duration.ofSeconds(10));
    assertThat(health.get(w)).isNull();
    assertThat(index.view(w)).as("purged from the index").isNull();
    assertThat(index.entries()).isZero();
  }

  @Test
  void metricsAreExportedPerWorkerAndForTheIndex() throws Exception {
    KvIndexMetrics.bind(index, registry);
    sub.start();
    KvEventPublisher p = publisher(PublisherConfig.vllm("tcp://127.0.0.1:*").withBind(true).withDataParallelRank(1));
    WorkerId w = new WorkerId("engine", 1);
    sub.add(EventSource.connect(w, "m", BS, p.endpoint(), null));
    publishUntil(p, w, 2);
    assertThat(registry.get("kvrouter.events.applied").tags("worker", "engine", "dp_rank", "1", "event", "stored")
        .functionCounter().count()).isGreaterThanOrEqualTo(2);
    assertThat(registry.get("kvrouter.events.blocks").tags("op", "stored").functionCounter().count())
        .isGreaterThanOrEqualTo(2);
    assertThat(registry.get("kvrouter.events.stale").tags("worker", "engine").gauge().value()).isZero();
    assertThat(registry.get("kvrouter.events.buffer.memory").tags("worker", "engine", "dp_rank", "1").gauge().value())
        .isPositive();
    assertThat(registry.get("kvrouter.events.lag").tags("worker", "engine").gauge().value()).isFinite();
    assertThat(registry.get("kvrouter.events.last.event.age").tags("worker", "engine").gauge().value())
        .isGreaterThanOrEqualTo(0);
    assertThat(registry.get("kvrouter.index.worker.blocks").tags("worker", "engine").gauge().value())
        .isGreaterThanOrEqualTo(2);
    assertThat(registry.get("kvrouter.index.entries").gauge().value()).isGreaterThanOrEqualTo(2);
    assertThat(registry.get("kvrouter.events.stale.workers").gauge().value()).isZero();
    assertThat(registry.get("kvrouter.events.dp_rank_mismatch").tags("worker", "engine").functionCounter().count())
        .isZero();
    assertThat(health.snapshots()).extracting(WorkerEventHealth.Snapshot::worker).containsExactly(w);
  }

  @Test
  void aReplayEndpointThatCannotBeConnectedFailsOnlyItsWorkersReplay() throws Exception {
    EventSubscriber one = new EventSubscriber(index, health, SubscriberConfig.defaults().withShards(1),
        Clock.systemUTC(), EventSubscriberTest::daemon);
    closeables.add(one);
    one.start();
    KvEventPublisher pa = publisher(PublisherConfig.vllm("tcp://127.0.0.1:*").withBind(true));
    KvEventPublisher pb = publisher(PublisherConfig.vllm("tcp://127.0.0.1:*").withBind(true));
    WorkerId a = WorkerId.of("a");
    WorkerId b = WorkerId.of("b");
    one.add(EventSource.connect(b, "m", BS, pb.endpoint(), null));
    publishUntil(pb, b, 1);
    // a's engine has published before we join, so a's first message asks for a replay from 0
    for (int i = 0; i < 3; i++) {
      pa.publish(List.of(BlockStored.of(new long[] {1000 + i}, null, new int[] {9, 9, 9, i}, BS, "GPU")));
    }
    pa.flush(Duration.ofSeconds(5));
    one.add(EventSource.connect(a, "m", BS, pa.endpoint(), UNCONNECTABLE));
    publishUntil(pa, a, 1);
    publishUntil(pb, b, 2);
    assertThat(health.get(a).count(EventCounter.REPLAY_FAILURES)).isPositive();
    assertThat(health.get(a).count(EventCounter.ERRORS)).isZero();
    assertThat(health.get(a).stale()).as("a late join without replay claims nothing false").isFalse();
  }

  @Test
  void aSourceThatCannotBeConnectedIsStale() throws Exception {
    sub.start();
    WorkerId w = WorkerId.of("w");
    sub.add(EventSource.connect(w, "m", BS, UNCONNECTABLE, null));
    sub.sync(Duration.ofSeconds(10));
    assertThat(health.get(w).stale()).isTrue();
    assertThat(health.get(w).staleReason()).startsWith("cannot connect to " + UNCONNECTABLE);
  }

  @Test
  void aSourceMovingToAnotherShardIsPurgedByItsOldShardBeforeTheNewOneFollowsIt() throws Exception {
    sub.start();
    KvEventPublisher p = publisher(PublisherConfig.vllm("tcp://127.0.0.1:*").withBind(true));
    WorkerId w = WorkerId.of("w");
    EventSource before = EventSource.connect(w, "m", BS, p.endpoint(), null);
    EventSource after = null;
    // bind mode shards by endpoint: a port whose endpoint lands on the other shard, one in two
    for (int i = 0; i < 64 && after == null; i++) {
      EventSource candidate = new EventSource(w, "m", BS, "tcp://127.0.0.1:" + freePort(), null, "", true);
      if (shardThread(candidate) != shardThread(before)) {
        after = candidate;
      }
    }
    assertThat(after).as("an endpoint on the other shard").isNotNull();
    sub.add(before);
    publishUntil(p, w, 2);

    // the old shard is busy (a long replay of another worker, say) while the source moves
    CountDownLatch release = new CountDownLatch(1);
    sub.runOnShardOf(before, () -> {
      try {
        release.await(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    sub.add(after);
    CountDownLatch newShardIdle = new CountDownLatch(1);
    sub.runOnShardOf(after, newShardIdle::countDown);
    assertThat(newShardIdle.await(10, TimeUnit.SECONDS)).isTrue();
    release.countDown();
    sub.sync(Duration.ofSeconds(10));

    assertThat(sub.sources()).containsKey(w);
    assertThat(index.view(w)).as("w in the index").isNotNull();
    assertThat(index.view(w).size()).as("followed afresh").isZero();
    KvEventPublisher moved = publisher(PublisherConfig.vllm(after.endpoint()).withBind(false));
    publishUntil(moved, w, 1);
  }

  /** The event thread following {@code source}. */
  private Thread shardThread(EventSource source) throws Exception {
    CompletableFuture<Thread> t = new CompletableFuture<>();
    sub.runOnShardOf(source, () -> t.complete(Thread.currentThread()));
    return t.get(10, TimeUnit.SECONDS);
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }
}
