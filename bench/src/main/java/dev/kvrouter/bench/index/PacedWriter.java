package dev.kvrouter.bench.index;

/**
 * Drives {@link LookupFixture}'s concurrent writer at a set rate of block events per second, or flat out (rate 0).
 * Paced in batches of {@value #BATCH} events: {@link #step} spins on {@code System.nanoTime} until the next batch is
 * due, then applies it, as an event thread applies one received batch; no sleep (a sleep's wake-up latency on a
 * loaded machine is far coarser than a batch period). After a stall (the thread descheduled) it catches up at most
 * {@value #MAX_LAG_NANOS} ns worth of batches, then drops the rest of the debt, so a stall does not turn into a long
 * flat-out burst. Single-threaded: one writer thread owns it.
 */
final class PacedWriter {

  static final int BATCH = 16;
  private static final long MAX_LAG_NANOS = 1_000_000;

  private final LookupFixture fixture;
  private final LookupFixture.WriteTarget target;
  private final long rate;
  private final double periodNanos;
  private long start;
  private long batches;
  private long next;

  /**
   * @param eventsPerSecond target rate, 0 for flat out
   */
  PacedWriter(LookupFixture fixture, LookupFixture.WriteTarget target, long eventsPerSecond) {
    if (eventsPerSecond < 0) {
      throw new IllegalArgumentException("rate must be >= 0, was " + eventsPerSecond);
    }
    this.fixture = fixture;
    this.target = target;
    this.rate = eventsPerSecond;
    this.periodNanos = eventsPerSecond == 0 ? 0 : BATCH * 1e9 / eventsPerSecond;
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
      Thread.onSpinWait();
    }
    if (now - next > MAX_LAG_NANOS) {
      start = now - MAX_LAG_NANOS;
      batches = 0;
    }
    for (int i = 0; i < BATCH; i++) {
      fixture.writeNext(target);
    }
    batches++;
    next = start + (long) (batches * periodNanos);
    return BATCH;
  }

  LookupFixture.WriteTarget target() {
    return target;
  }
}
