package dev.kvrouter.examples.sim.clock;

/**
 * The time source and the single thread that owns a simulated engine.
 *
 * <p>Everything an engine does happens in tasks run by its clock, one at a time: in real time a single-threaded
 * scheduled executor, in virtual time a discrete-event loop. So the engine code is the same in both modes and
 * never locks; callers on other threads hand work over with {@link #execute(Runnable)}.
 */
public interface SimClock {

  /** Monotonic time in nanoseconds; only differences are meaningful. */
  long nanoTime();

  /** Wall-clock time in seconds since the epoch, as vLLM stamps event batches ({@code time.time()}). */
  double epochSeconds();

  /** Runs {@code task} on the owner thread as soon as possible, after tasks already due. */
  void execute(Runnable task);

  /** Runs {@code task} on the owner thread at {@code atNanos} (or as soon as possible after it). */
  Cancellable schedule(long atNanos, Runnable task);

  /** A scheduled task that can still be called off. */
  @FunctionalInterface
  interface Cancellable {
    /** Prevents the task from running if it has not started; harmless otherwise. */
    void cancel();
  }
}
