package dev.kvrouter.extproc.server;

import java.util.concurrent.Executor;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * The routing threads (bodies routed off the event loop), with the time the oldest queued request has waited for
 * one. That wait is how the router knows it has stopped keeping up: with a body mode Envoy puts no timeout on
 * (FULL_DUPLEX_STREAMED), a request queued here waits for as long as the queue does.
 */
final class RoutingPool implements Executor {

  private final ThreadPoolExecutor pool;

  RoutingPool(int threads, ThreadFactory factory) {
    // Fixed: routing is CPU-bound, and more threads than cores under a burst only add contention.
    pool = new ThreadPoolExecutor(threads, threads, 0, TimeUnit.MILLISECONDS, new LinkedBlockingQueue<>(), factory);
  }

  @Override
  public void execute(Runnable task) {
    pool.execute(new Queued(task, System.nanoTime()));
  }

  /** Nanoseconds the oldest task not yet started has waited at {@code now}; 0 when none waits. */
  long oldestWaitNanos(long now) {
    // FIFO queue: its head is the oldest
    return pool.getQueue().peek() instanceof Queued q ? Math.max(0, now - q.since) : 0;
  }

  void shutdownNow() {
    pool.shutdownNow();
  }

  private record Queued(Runnable task, long since) implements Runnable {
    @Override
    public void run() {
      task.run();
    }
  }
}
