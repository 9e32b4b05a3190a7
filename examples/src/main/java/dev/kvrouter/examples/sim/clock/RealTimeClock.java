package dev.kvrouter.examples.sim.clock;

import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Real time: {@link System#nanoTime()} and one scheduled executor thread that owns the engine.
 *
 * <p>The executor must have exactly one thread, or the engine's single-owner contract breaks. A task that
 * throws is logged here (a scheduled executor would otherwise keep the exception in a future nobody reads).
 */
public final class RealTimeClock implements SimClock, AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(RealTimeClock.class);

  private final ScheduledExecutorService executor;
  private final boolean owned;

  /** Wraps an existing single-threaded scheduler; the caller shuts it down. */
  public RealTimeClock(ScheduledExecutorService singleThreadScheduler) {
    this.executor = singleThreadScheduler;
    this.owned = false;
  }

  private RealTimeClock(ScheduledThreadPoolExecutor owned) {
    this.executor = owned;
    this.owned = true;
  }

  /** A clock with its own daemon thread named {@code threadName}; {@link #close()} stops it. */
  public static RealTimeClock withOwnThread(String threadName) {
    ScheduledThreadPoolExecutor ex = new ScheduledThreadPoolExecutor(1, r -> {
      Thread t = new Thread(r, threadName);
      t.setDaemon(true);
      return t;
    });
    ex.setRemoveOnCancelPolicy(true);
    return new RealTimeClock(ex);
  }

  @Override
  public long nanoTime() {
    return System.nanoTime();
  }

  @Override
  public double epochSeconds() {
    return System.currentTimeMillis() / 1000.0;
  }

  @Override
  public void execute(Runnable task) {
    executor.execute(logged(task));
  }

  @Override
  public Cancellable schedule(long atNanos, Runnable task) {
    long delay = atNanos - System.nanoTime();
    ScheduledFuture<?> f = executor.schedule(logged(task), Math.max(0, delay), TimeUnit.NANOSECONDS);
    return () -> f.cancel(false);
  }

  private static Runnable logged(Runnable task) {
    return () -> {
      try {
        task.run();
      } catch (RuntimeException | Error e) {
        log.error("simulated engine task failed; the engine may be stuck", e);
        throw e;
      }
    };
  }

  @Override
  public void close() {
    if (owned) {
      executor.shutdownNow();
      try {
        executor.awaitTermination(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
