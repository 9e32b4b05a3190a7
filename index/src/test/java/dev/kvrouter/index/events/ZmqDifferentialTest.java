package dev.kvrouter.index.events;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.PrefixCursor;
import dev.kvrouter.index.PrefixMatches;
import dev.kvrouter.index.Tier;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.wire.HashEncoding;
import dev.kvrouter.index.wire.KvEventPublisher;
import dev.kvrouter.index.wire.PublisherConfig;
import dev.kvrouter.index.wire.ReplayLayout;
import dev.kvrouter.index.wire.WireLayout;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Real JeroMQ publishers (ours, vLLM-compatible) publish a seeded random stream for three workers in three
 * wire generations while dropping, reordering and restarting; the subscriber must end with an index equal to
 * the engines' true caches. With replay the equality must hold after every fault; without replay gaps must
 * show as a stale view, and an engine restart must bring the view back to exact and fresh.
 */
@Timeout(180)
class ZmqDifferentialTest {

  private static final int BS = 8;
  private final List<AutoCloseable> closeables = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = closeables.size() - 1; i >= 0; i--) {
      closeables.get(i).close();
    }
  }

  /** {@code lost[0]}: messages ZMQ dropped around restarts (before the SUB reconnected), measured by the test. */
  private record Worker(SimEngine engine, KvEventPublisher publisher, EventSource source, long[] lost) {}

  private List<Worker> workers(long seed, boolean replay) {
    WireLayout[] layouts = {WireLayout.VLLM_MAP, WireLayout.VLLM_ARRAY, WireLayout.SGLANG_ARRAY};
    HashEncoding[] hashes = {HashEncoding.UNSIGNED, HashEncoding.BYTES, HashEncoding.SIGNED};
    ReplayLayout[] replies = {ReplayLayout.WITH_TOPIC, ReplayLayout.WITHOUT_TOPIC, ReplayLayout.WITHOUT_TOPIC};
    List<Worker> out = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      WorkerId id = new WorkerId("engine-" + i, i == 2 ? 1 : 0);
      PublisherConfig cfg = PublisherConfig.vllm("tcp://127.0.0.1:*").withBind(true)
          .withLayout(layouts[i], hashes[i]).withTopic(i == 0 ? "kv@engine-0@m" : "")
          .withDataParallelRank(id.dpRank());
      if (replay) {
        cfg = cfg.withReplay("tcp://127.0.0.1:*", replies[i]);
      }
      KvEventPublisher p = KvEventPublisher.start(cfg);
      closeables.add(p);
      SimEngine e = new SimEngine(id, "model-x", BS, layouts[i], seed * 31 + i);
      out.add(new Worker(e, p, new EventSource(id, "model-x", BS, p.endpoint(), p.replayEndpoint(),
          i == 0 ? "kv@" : "", false), new long[1]));
    }
    return out;
  }

  @Test
  void withReplayTheIndexEqualsTheEnginesAfterDropsReordersAndRestarts() throws Exception {
    run(11, true);
  }

  @Test
  void withoutReplayGapsAreStaleAndARestartMakesTheViewExactAgain() throws Exception {
    run(12, false);
  }

  private void run(long seed, boolean replay) throws Exception {
    SplittableRandom r = new SplittableRandom(seed);
    KvIndex index = new KvIndex(IndexConfig.defaults(), Clock.systemUTC());
    EventPlaneHealth health = new EventPlaneHealth(new SimpleMeterRegistry(), Clock.systemUTC(), Duration.ZERO);
    List<String> staleLog = new CopyOnWriteArrayList<>();
    health.addListener((id, s, reason) -> staleLog.add(id + (s ? " stale: " : " fresh: ") + reason));
    EventSubscriber sub = new EventSubscriber(index, health, SubscriberConfig.defaults().withShards(2)
        .withReplayTimeout(5000), Clock.systemUTC(), runnable -> {
          Thread t = new Thread(runnable, "kv-events-test");
          t.setDaemon(true);
          return t;
        });
    closeables.add(sub);
    sub.start();
    List<Worker> ws = workers(seed, replay);
    sub.reconcile(ws.stream().map(Worker::source).toList());
    sub.sync(Duration.ofSeconds(10));
    warmUp(ws, health);

    int batches = 700;
    int restarts = 0;
    for (int step = 0; step < batches; step++) {
      Worker w = ws.get(r.nextInt(ws.size()));
      int fault = r.nextInt(200);
      if (fault < 5) {
        w.publisher().dropNext(1 + r.nextInt(3));
      } else if (fault < 8) {
        w.publisher().holdAndReverse(2 + r.nextInt(2));
      }
      if (step % 175 == 100) {
        restart(ws.get(step / 175 % ws.size()), ws, health);
        restarts++;
      }
      w.publisher().publish(w.engine().step());
      if (step % 25 == 24) {
        // keep the subscriber following live, so faults show up as gaps rather than as one late join
        for (Worker x : ws) {
          x.publisher().flush(Duration.ofSeconds(10));
        }
        awaitDelivered(ws, health);
      }
    }
    if (!replay) {
      // gaps happened and were visible; now every engine restarts, which must make each view exact again
      assertThat(staleLog).as("gaps without replay mark views stale").anyMatch(s -> s.contains(" stale: "));
      for (Worker w : ws) {
        restart(w, ws, health);
      }
    }
    // a clean tail: releases held batches, exposes trailing drops, lets replays finish
    for (int k = 0; k < 10; k++) {
      for (Worker w : ws) {
        w.publisher().publish(w.engine().step());
      }
    }
    for (Worker w : ws) {
      w.publisher().flush(Duration.ofSeconds(10));
    }
    awaitCaughtUp(ws, health);
    sub.sync(Duration.ofSeconds(10));

    PrefixCursor cursor = index.newCursor();
    PrefixMatches out = new PrefixMatches();
    for (Worker w : ws) {
      SimEngine e = w.engine();
      WorkerEventHealth h = health.get(e.id);
      String ctx = "seed " + seed + " " + e.id + " restarts " + restarts + " health " + h.snapshot(0);
      assertThat(h.stale()).as(ctx).isFalse();
      assertThat(index.view(e.id).size()).as(ctx).isEqualTo(e.heldCount());
      int checked = 0;
      for (long ours : e.everStored) {
        index.lookup(cursor, new long[] {ours}, 1, out);
        int i = out.indexOf(e.id);
        Tier truth = e.trueTier(ours);
        Tier seen = i < 0 ? null : out.gpuBlocks(i) == 1 ? Tier.GPU : out.cpuBlocks(i) == 1 ? Tier.CPU : Tier.DISK;
        assertThat(seen).as(ctx + " block " + Long.toHexString(ours)).isEqualTo(truth);
        checked++;
      }
      assertThat(checked).as("blocks compared").isGreaterThan(100);
      if (replay) {
        assertThat(h.count(EventCounter.UNKNOWN_PARENT)).as(ctx).isZero();
      }
    }
    long gaps = ws.stream().mapToLong(w -> health.get(w.engine().id).count(EventCounter.GAPS)).sum();
    assertThat(gaps).as("the faults produced gaps").isPositive();
    if (replay) {
      assertThat(ws.stream().mapToLong(w -> health.get(w.engine().id).count(EventCounter.REPLAYS)).sum()).isPositive();
      assertThat(restarts).as("the seed exercises restarts").isPositive();
    }
  }

  /**
   * Restarts an engine and its publisher, then sends empty probes until the subscriber has seen the new
   * lifetime. (A router cannot tell a restart from a gap if it misses every message of the new lifetime up
   * to the old sequence number; probing keeps the test on the detectable side of that limit.) Probes sent
   * before the SUB reconnected are lost, which the test records so it can keep counting deliveries.
   */
  private static void restart(Worker w, List<Worker> ws, EventPlaneHealth health) throws InterruptedException {
    w.publisher().flush(Duration.ofSeconds(10));
    awaitDelivered(ws, health);
    WorkerEventHealth h = health.get(w.engine().id);
    long resets = h.count(EventCounter.RESETS);
    w.engine().restart();
    w.publisher().restart();
    for (int i = 0; i < 60 && h.count(EventCounter.RESETS) == resets; i++) {
      w.publisher().publish(List.of());
      w.publisher().flush(Duration.ofSeconds(5));
      Thread.sleep(20);
    }
    assertThat(h.count(EventCounter.RESETS)).as("restart of %s detected", w.engine().id).isGreaterThan(resets);
    w.lost()[0] = w.publisher().sentBatches() - h.count(EventCounter.RECEIVED);
  }

  private static String eventThreads() {
    StringBuilder b = new StringBuilder();
    Thread.getAllStackTraces().forEach((t, st) -> {
      if (t.getName().startsWith("kv-")) {
        b.append(t.getName()).append('\n');
        for (int i = 0; i < Math.min(12, st.length); i++) {
          b.append("    at ").append(st[i]).append('\n');
        }
      }
    });
    return b.toString();
  }

  /** Empty probes until every subscription has propagated (ZMQ drops what a PUB sends before that). */
  private static void warmUp(List<Worker> ws, EventPlaneHealth health) throws InterruptedException {
    for (Worker w : ws) {
      WorkerEventHealth h = health.get(w.engine().id);
      for (int i = 0; i < 200 && h.lastSeq() < 0; i++) {
        w.publisher().publish(List.of());
        w.publisher().flush(Duration.ofSeconds(5));
        Thread.sleep(10);
      }
      assertThat(h.lastSeq()).as("subscription of %s propagated: %s, %d replay requests served, threads:%n%s",
          w.engine().id, h.snapshot(0), w.publisher().replayRequests(), eventThreads()).isNotNegative();
      // probes sent before the subscription propagated are lost (a probe still in flight only makes this lenient)
      w.lost()[0] = w.publisher().sentBatches() - h.count(EventCounter.RECEIVED);
    }
  }

  /** Waits until the subscriber has received every message each publisher sent (minus those lost at restarts). */
  private static void awaitDelivered(List<Worker> ws, EventPlaneHealth health) throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    for (Worker w : ws) {
      WorkerEventHealth h = health.get(w.engine().id);
      long expected = w.publisher().sentBatches() - w.lost()[0];
      while (h.count(EventCounter.RECEIVED) < expected) {
        if (System.nanoTime() > deadline) {
          throw new AssertionError(w.engine().id + " received " + h.count(EventCounter.RECEIVED) + " of " + expected);
        }
        Thread.sleep(2);
      }
    }
  }

  private static void awaitCaughtUp(List<Worker> ws, EventPlaneHealth health) throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (System.nanoTime() < deadline) {
      boolean all = true;
      for (Worker w : ws) {
        all &= health.get(w.engine().id).lastSeq() == w.publisher().lastSeq();
      }
      if (all) {
        return;
      }
      Thread.sleep(10);
    }
    StringBuilder b = new StringBuilder("subscriber did not catch up:");
    for (Worker w : ws) {
      b.append(' ').append(w.engine().id).append(" at ").append(health.get(w.engine().id).lastSeq())
          .append(" of ").append(w.publisher().lastSeq());
    }
    throw new AssertionError(b.toString());
  }
}
