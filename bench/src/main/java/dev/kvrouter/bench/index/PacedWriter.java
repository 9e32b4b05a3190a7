package dev.kvrouter.bench.index;

/**
 * Drives {@link LookupFixture}'s concurrent writer at a set rate of block events per second, or flat out (rate 0).
 * Paced in batches of {@value #BATCH} events: {@link #step} spins on {@code System.nanoTime} until the next batch is
 * due, then applies it, as an event thread applies one received batch; no sleep (a sleep's wake-up latency on a
 * loaded machine is far coarser than a batch period). After a stall (the thread descheduled) it catches up at most
 * {@value #MAX_LAG_NANOS} ns worth of batches, then drops the rest of the debt, so a stall does not turn into a long
 * flat-out burst. Single-threaded: one writer thread owns it.
 *
 * <p>{@link #parking}: batches of {@value #PARK_BATCH} events and the thread parked between them (spinning only the
 * last {@value #SPIN_NANOS} ns), as a real event thread waits in {@code poll} for an engine's next batch (vLLM sends
 * one batch per engine step, ~160 block events per worker at the fleet rate); a spinning writer keeps the other
 * vCPU (on this VM, possibly the reader's hyperthread sibling) busy all the time, which no event thread does.
 */
final class PacedWriter {

  static final int BATCH = 16;
  static final int PARK_BATCH = 160;
  private static final long SPIN_NANOS = 80_000;
  private static final long MAX_LAG_NANOS = 1_000_000;

  private final LookupFixture fixture;
  private final LookupFixture.WriteTarget target;
  private final long rate;
  private final double periodNanos;
  private final int batch;
  private final boolean park;
  private long start;
  private long batches;
  private long next;

  /**
   * @param eventsPerSecond target rate, 0 for flat out
   */
  PacedWriter(LookupFixture fixture, LookupFixture.WriteTarget target, long eventsPerSecond) {
    this(fixture, target, eventsPerSecond, false);
  }

  /** A writer that parks between batches of {@value #PARK_BATCH} instead of spinning (see the class notes). */
  static PacedWriter parking(LookupFixture fixture, LookupFixture.WriteTarget target, long eventsPerSecond) {
    return new PacedWriter(fixture, target, eventsPerSecond, true);
  }

  /** {@code idle}: {@code spin} (batches of {@value #BATCH}, busy-waiting) or {@code park}. */
  static PacedWriter of(LookupFixture fixture, LookupFixture.WriteTarget target, long eventsPerSecond, String idle) {
    return switch (idle) {
      case "spin" -> new PacedWriter(fixture, target, eventsPerSecond, false);
      case "park" -> parking(fixture, target, eventsPerSecond);
      default -> throw new IllegalArgumentException("writeIdle must be spin or park, was " + idle);
    };
  }

  private PacedWriter(LookupFixture fixture, LookupFixture.WriteTarget target, long eventsPerSecond, boolean park) {
    if (eventsPerSecond < 0 || (park && eventsPerSecond == 0)) {
      throw new IllegalArgumentException("rate must be >= 0, was " + eventsPerSecond);
    }
    this.fixture = fixture;
    this.target = target;
    this.rate = eventsPerSecond;
    this.park = park;
    this.batch = park ? PARK_BATCH : BATCH;
    this.periodNanos = eventsPerSecond == 0 ? 0 : batch * 1e9 / eventsPerSecond;
    this.start = System.nanoTime();
    this.next = start;
  }

  /** Applies the next event (flat out) or waits for and applies the next batch; returns the events applied. */
  int step() {
    if (rate == 0) {
      fixture.writeNext(target);
      return 1;
    }
    long now;
    while ((now = System.nanoTime()) < next) {
      if (park && next - now > SPIN_NANOS) {
        java.util.concurrent.locks.LockSupport.parkNanos(next - now - SPIN_NANOS);
      } else {
        Thread.onSpinWait();
      }
    }
    if (now - next > MAX_LAG_NANOS) {
      start = now - MAX_LAG_NANOS;
      batches = 0;
    }
    for (int i = 0; i < batch; i++) {
      fixture.writeNext(target);
    }
    batches++;
    next = start + (long) (batches * periodNanos);
    return batch;
  }

  LookupFixture.WriteTarget target() {
    return target;
  }
}
