package dev.kvrouter.examples.sim.events;

import dev.kvrouter.examples.sim.clock.SimClock;
import dev.kvrouter.index.wire.EventBatch;
import dev.kvrouter.index.wire.EventDecoder;
import dev.kvrouter.index.wire.EventEncoder;
import dev.kvrouter.index.wire.WireLayout;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.SplittableRandom;
import java.util.function.Consumer;

/**
 * A publisher without sockets: numbers batches like vLLM's ZMQ publisher (from 0, +1 per batch, reset on
 * restart) and delivers them to an in-process subscriber through the engine's clock, with the same fault
 * semantics as {@link ZmqKvEventSink}. This is the event plane of the virtual-time replay.
 *
 * <p>Faults: a dropped batch, or any batch while stopped, is numbered and never delivered (a gap); a reordered
 * batch is held and delivered right after the next one (or after {@code delay + 50 ms} if none follows); every
 * delivery is delayed by {@code delayMillis}. Randomness is seeded, so a virtual-time run is reproducible.
 *
 * <p>Like vLLM's ROUTER socket, the sink can keep the last {@code bufferSteps} numbered batches (delivered or
 * not) for {@link #replay}; 0 turns replay off. The buffer holds the events themselves, so size it to the
 * workload (vLLM's default is 10,000 batches).
 *
 * <p>With a {@link WireLayout} every batch is encoded and decoded on the way, so the subscriber sees exactly
 * what it would decode from a real worker of that layout (for example no {@code cache_salt} field in vLLM's
 * layouts); without one the records are passed as they are.
 *
 * <p>Concurrency: called on the engine's owner thread (including {@link #setFaults}); delivers on the same
 * clock, so the subscriber runs on that thread too.
 */
public final class InProcessKvEventSink implements KvEventSink {

  private static final long HOLD_NANOS = 50_000_000L;

  private final SimClock clock;
  private final Consumer<SequencedKvEventBatch> subscriber;
  private final SplittableRandom random;
  private final EventEncoder encoder;
  private final EventDecoder decoder;
  private final int bufferSteps;
  private final ArrayDeque<SequencedKvEventBatch> buffer = new ArrayDeque<>();
  private boolean replayEnabled = true;
  private EventFaults faults = EventFaults.NONE;
  private long nextSeq;
  private long lifetime;
  private SequencedKvEventBatch held;
  private boolean dead;
  private long published;
  private long dropped;

  /** Passes records through unchanged; no replay buffer. */
  public InProcessKvEventSink(SimClock clock, long seed, Consumer<SequencedKvEventBatch> subscriber) {
    this(clock, seed, null, 0, subscriber);
  }

  /**
   * @param layout wire layout every batch is round-tripped through, or {@code null} to pass records
   * @param bufferSteps batches kept for {@link #replay}, 0 for none
   */
  public InProcessKvEventSink(SimClock clock, long seed, WireLayout layout, int bufferSteps,
      Consumer<SequencedKvEventBatch> subscriber) {
    if (bufferSteps < 0) {
      throw new IllegalArgumentException("bufferSteps must be >= 0");
    }
    this.bufferSteps = bufferSteps;
    this.clock = Objects.requireNonNull(clock, "clock");
    this.subscriber = Objects.requireNonNull(subscriber, "subscriber");
    this.random = new SplittableRandom(seed);
    this.encoder = layout == null ? null : new EventEncoder(layout);
    this.decoder = layout == null ? null : new EventDecoder();
  }

  @Override
  public void publish(EventBatch batch) {
    if (dead) {
      return;
    }
    EventBatch wire = encoder == null ? batch : decoder.decode(encoder.encode(batch));
    SequencedKvEventBatch b = new SequencedKvEventBatch(nextSeq++, wire);
    published++;
    if (bufferSteps > 0) {
      buffer.addLast(b);
      if (buffer.size() > bufferSteps) {
        buffer.removeFirst();
      }
    }
    if (faults.stopped() || (faults.dropRate() > 0 && random.nextDouble() < faults.dropRate())) {
      dropped++;
      return;
    }
    if (held == null && faults.reorderRate() > 0 && random.nextDouble() < faults.reorderRate()) {
      held = b;
      long myLifetime = lifetime;
      SequencedKvEventBatch mine = b;
      clock.schedule(clock.nanoTime() + faults.delayMillis() * 1_000_000L + HOLD_NANOS, () -> {
        if (held == mine && lifetime == myLifetime) {
          held = null;
          deliver(mine);
        }
      });
      return;
    }
    deliver(b);
    if (held != null) {
      SequencedKvEventBatch h = held;
      held = null;
      deliver(h);
    }
  }

  private void deliver(SequencedKvEventBatch b) {
    long delay = faults.delayMillis() * 1_000_000L;
    long myLifetime = lifetime;
    if (delay == 0) {
      subscriber.accept(b);
    } else {
      clock.schedule(clock.nanoTime() + delay, () -> {
        if (lifetime == myLifetime) {
          subscriber.accept(b);
        }
      });
    }
  }

  /**
   * What a replay request from {@code fromSeq} returns: the buffered batches numbered {@code fromSeq} or later,
   * in order (an empty list when replay is off, the process is down, or the buffer no longer reaches back).
   * Synchronous, on the clock's thread.
   */
  public List<SequencedKvEventBatch> replay(long fromSeq) {
    List<SequencedKvEventBatch> out = new ArrayList<>();
    if (dead || !replayEnabled) {
      return out;
    }
    for (SequencedKvEventBatch b : buffer) {
      if (b.seq() >= fromSeq) {
        out.add(b);
      }
    }
    return out;
  }

  /** Fault: a dead or misconfigured replay socket. */
  public void setReplayEnabled(boolean enabled) {
    this.replayEnabled = enabled;
  }

  @Override
  public void crashed() {
    dead = true;
    held = null;
    buffer.clear();
    lifetime++; // batches still in flight died with the process's socket buffers
  }

  @Override
  public void restart() {
    dead = false;
    held = null;
    nextSeq = 0;
    buffer.clear();
  }

  @Override
  public void setFaults(EventFaults faults) {
    this.faults = Objects.requireNonNull(faults, "faults");
  }

  /** Batches numbered so far (including dropped ones). */
  public long published() {
    return published;
  }

  /** Batches numbered and then not delivered (dropped or stopped). */
  public long dropped() {
    return dropped;
  }
}
