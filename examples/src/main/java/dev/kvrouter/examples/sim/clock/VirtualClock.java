package dev.kvrouter.examples.sim.clock;

import java.util.PriorityQueue;

/**
 * A discrete-event loop: virtual time jumps from one due task to the next, so hours of simulated serving
 * replay in seconds.
 *
 * <p>Tasks due at the same instant run in the order they were scheduled, which makes a run a pure function of
 * its inputs and seeds. Not thread-safe: one thread schedules and runs everything (the thread that calls
 * {@link #runUntil(long, long)}); that thread is the owner of every engine driven by this clock.
 */
public final class VirtualClock implements SimClock {

  private final PriorityQueue<Task> queue = new PriorityQueue<>();
  private final double epochOffsetSeconds;
  private long now;
  private long seq;

  /** A clock at virtual time 0 whose wall clock reads {@code epochOffsetSeconds} at that instant. */
  public VirtualClock(double epochOffsetSeconds) {
    this.epochOffsetSeconds = epochOffsetSeconds;
  }

  public VirtualClock() {
    this(0.0);
  }

  @Override
  public long nanoTime() {
    return now;
  }

  @Override
  public double epochSeconds() {
    return epochOffsetSeconds + now / 1e9;
  }

  @Override
  public void execute(Runnable task) {
    schedule(now, task);
  }

  @Override
  public Cancellable schedule(long atNanos, Runnable task) {
    Task t = new Task(Math.max(atNanos, now), seq++, task);
    queue.add(t);
    return () -> t.cancelled = true;
  }

  /** Number of tasks waiting, including cancelled ones not yet discarded. */
  public int pending() {
    return queue.size();
  }

  /** Time of the next live task, or {@link Long#MAX_VALUE} if none. */
  public long nextDue() {
    while (!queue.isEmpty() && queue.peek().cancelled) {
      queue.poll();
    }
    return queue.isEmpty() ? Long.MAX_VALUE : queue.peek().at;
  }

  /**
   * Runs tasks in time order until none is due at or before {@code untilNanos}, then sets the clock to
   * {@code untilNanos} (if it is later than the last task).
   *
   * @param maxTasks a bound on the number of tasks run, so that a task which keeps rescheduling itself at the
   *     same instant cannot hang the caller
   * @return the number of tasks run
   * @throws IllegalStateException if {@code maxTasks} were run and more are due
   */
  public long runUntil(long untilNanos, long maxTasks) {
    long ran = 0;
    while (true) {
      Task t = queue.peek();
      if (t == null || t.at > untilNanos) {
        break;
      }
      if (ran >= maxTasks) {
        throw new IllegalStateException("virtual clock ran " + ran + " tasks without reaching " + untilNanos
            + " ns (now " + now + " ns): a task keeps rescheduling itself");
      }
      queue.poll();
      if (t.cancelled) {
        continue;
      }
      now = t.at;
      ran++;
      t.task.run();
    }
    if (untilNanos > now && untilNanos != Long.MAX_VALUE) {
      now = untilNanos;
    }
    return ran;
  }

  /** Runs every task until the queue is empty; see {@link #runUntil(long, long)}. */
  public long runUntilIdle(long maxTasks) {
    return runUntil(Long.MAX_VALUE, maxTasks);
  }

  private static final class Task implements Comparable<Task> {
    final long at;
    final long seq;
    final Runnable task;
    boolean cancelled;

    Task(long at, long seq, Runnable task) {
      this.at = at;
      this.seq = seq;
      this.task = task;
    }

    @Override
    public int compareTo(Task o) {
      int c = Long.compare(at, o.at);
      return c != 0 ? c : Long.compare(seq, o.seq);
    }
  }
}
