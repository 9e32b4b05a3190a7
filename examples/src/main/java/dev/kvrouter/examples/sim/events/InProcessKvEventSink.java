package dev.kvrouter.examples.sim.events;

import dev.kvrouter.examples.sim.clock.SimClock;
import java.util.Objects;
import java.util.SplittableRandom;
import java.util.function.Consumer;

/**
 * A publisher without sockets: numbers batches like vLLM's ZMQ publisher (from 0, +1 per batch, reset on
 * restart) and delivers them to an in-process subscriber through the engine's clock, with the same fault
 * injection a real worker offers. This is the event plane of the virtual-time replay.
 *
 * <p>Faults, in order: a stopped publisher discards batches before numbering them (silence, the subscriber sees
 * no gap); a dropped batch is numbered and lost (the subscriber sees a gap); a reordered batch is held and
 * delivered right after the next one (or after {@code delay + holdMillis} if none follows); every delivery is
 * delayed by {@code delayMillis}. Randomness is seeded, so a virtual-time run is reproducible.
 *
 * <p>Concurrency: called on the engine's owner thread; delivers on the same clock, so the subscriber runs on
 * that thread too.
 */
public final class InProcessKvEventSink implements KvEventSink {

  private static final long HOLD_NANOS = 50_000_000L;

  private final SimClock clock;
  private final Consumer<SequencedKvEventBatch> subscriber;
  private final SplittableRandom random;
  private EventFaults faults = EventFaults.NONE;
  private long nextSeq;
  private long lifetime;
  private SequencedKvEventBatch held;
  private boolean dead;
  private long published;
  private long dropped;

  public InProcessKvEventSink(SimClock clock, long seed, Consumer<SequencedKvEventBatch> subscriber) {
    this.clock = Objects.requireNonNull(clock, "clock");
    this.subscriber = Objects.requireNonNull(subscriber, "subscriber");
    this.random = new SplittableRandom(seed);
  }

  @Override
  public void publish(KvEventBatch batch) {
    if (dead || faults.stopped()) {
      return;
    }
    SequencedKvEventBatch b = new SequencedKvEventBatch(nextSeq++, batch);
    published++;
    if (faults.dropRate() > 0 && random.nextDouble() < faults.dropRate()) {
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

  @Override
  public void crashed() {
    dead = true;
    held = null;
    lifetime++; // batches still in flight died with the process's socket buffers
  }

  @Override
  public void restart() {
    dead = false;
    held = null;
    nextSeq = 0;
  }

  @Override
  public void setFaults(EventFaults faults) {
    this.faults = Objects.requireNonNull(faults, "faults");
  }

  /** Batches numbered so far (including dropped ones). */
  public long published() {
    return published;
  }

  /** Batches numbered and then dropped. */
  public long dropped() {
    return dropped;
  }
}
