package dev.kvrouter.examples.sim.events;

import dev.kvrouter.index.wire.EventBatch;
import dev.kvrouter.index.wire.KvEventPublisher;
import dev.kvrouter.index.wire.PublisherConfig;
import java.time.Duration;
import java.util.Objects;
import java.util.SplittableRandom;

/**
 * Publishes a simulated engine's events as a real vLLM worker does: through {@link KvEventPublisher} (ZMQ PUB
 * with {@code [topic, seq, payload]} frames, optional ROUTER replay, the layout of the configured vLLM or
 * SGLang release).
 *
 * <p>Faults map onto the publisher's hooks: a dropped batch is numbered and buffered for replay but not sent;
 * a reordered batch swaps places with the next one; the delay and the stopped state apply to every send. A
 * crash stops sending and answering replay; a restart re-opens the sockets on the same endpoints with the
 * sequence back at 0 and an empty replay buffer.
 *
 * <p>Concurrency: {@link #publish} and the lifecycle calls come from the engine's owner thread; the publisher
 * has its own thread and takes every call through one FIFO queue, so faults apply in call order.
 */
public final class ZmqKvEventSink implements KvEventSink {

  private final KvEventPublisher publisher;
  private final SplittableRandom random;
  private EventFaults faults = EventFaults.NONE;
  private int holdOutstanding;
  private boolean dead;

  private ZmqKvEventSink(KvEventPublisher publisher, long seed) {
    this.publisher = publisher;
    this.random = new SplittableRandom(seed);
  }

  /** Starts a publisher (binding or connecting its sockets) and wraps it. */
  public static ZmqKvEventSink start(PublisherConfig config, String threadName, long faultSeed) {
    KvEventPublisher p = KvEventPublisher.start(Objects.requireNonNull(config, "config"), r -> {
      Thread t = new Thread(r, threadName);
      t.setDaemon(true);
      return t;
    });
    return new ZmqKvEventSink(p, faultSeed);
  }

  /** The PUB endpoint actually bound (ephemeral ports resolved). */
  public String endpoint() {
    return publisher.endpoint();
  }

  /** The ROUTER replay endpoint actually bound, or {@code null}. */
  public String replayEndpoint() {
    return publisher.replayEndpoint();
  }

  public KvEventPublisher publisher() {
    return publisher;
  }

  @Override
  public void publish(EventBatch batch) {
    if (dead) {
      return;
    }
    if (faults.dropRate() > 0 && random.nextDouble() < faults.dropRate()) {
      publisher.dropNext(1);
    } else if (holdOutstanding == 0 && faults.reorderRate() > 0 && random.nextDouble() < faults.reorderRate()) {
      publisher.holdAndReverse(2);
      holdOutstanding = 2;
    }
    if (holdOutstanding > 0) {
      holdOutstanding--;
    }
    publisher.publish(batch.events(), batch.ts(), batch.dataParallelRank());
  }

  @Override
  public void setFaults(EventFaults f) {
    Objects.requireNonNull(f, "faults");
    EventFaults old = faults;
    faults = f;
    if (f.delayMillis() != old.delayMillis()) {
      publisher.setDelay(Duration.ofMillis(f.delayMillis()));
    }
    if (f.stopped() != old.stopped() && !dead) {
      if (f.stopped()) {
        publisher.stopPublishing();
      } else {
        publisher.resumePublishing();
      }
    }
  }

  @Override
  public void crashed() {
    dead = true;
    holdOutstanding = 0;
    publisher.stopPublishing();
    publisher.setReplayEnabled(false);
  }

  @Override
  public void restart() {
    publisher.restart();
    publisher.setReplayEnabled(true);
    if (faults.stopped()) {
      publisher.stopPublishing();
    }
    holdOutstanding = 0;
    dead = false;
  }

  @Override
  public void close() {
    publisher.close();
  }
}
