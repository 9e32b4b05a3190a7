package dev.kvrouter.extproc.load;

import java.util.Collection;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether the router should send a worker new requests, from two signals it sees itself:
 *
 * <ul>
 *   <li>the metrics scraper could not reach the worker {@code unreachableAfter} times in a row (connection
 *       refused, timeout); one successful contact clears it. A worker that answers its metrics URL with an error
 *       status (no metrics exposed) is reachable, hence healthy;
 *   <li>outlier detection: {@code ejectAfterErrors} consecutive 5xx responses eject the worker for
 *       {@code ejectNanos}; any non-5xx response resets the streak. When an ejection ends the worker is on
 *       probation until it answers a request well: a single 5xx ejects it again, for twice as long as the last time
 *       (at most {@code maxEjectNanos}). So a worker that restarts quickly is back after a short ejection, and one
 *       that stays down costs one failed request per ejection, not a new streak of {@code ejectAfterErrors}.
 * </ul>
 *
 * <p>Envoy's own health checks and outlier detection still apply downstream; this view exists so the router
 * does not spend its cache affinity on a worker that cannot answer. Concurrency: any thread may report, any
 * thread may read; state per worker is a few atomics.
 */
public final class WorkerHealth {

  private static final Logger log = LoggerFactory.getLogger(WorkerHealth.class);

  /** Why a worker is not healthy (a {@code why_not} in decision records). */
  public static final String UNREACHABLE = "unhealthy_unreachable";
  public static final String EJECTED = "unhealthy_5xx";

  /**
   * A departed worker's requests are still answered (by Envoy with a 503 once its cluster is gone) and its last
   * scrape may still fail: no state is made for those reports.
   */
  private final FleetMap<String, State> workers = new FleetMap<>();
  private final LongSupplier nanoClock;
  private final int unreachableAfter;
  private final int ejectAfterErrors;
  private final long ejectNanos;
  private final long maxEjectNanos;

  /** Ejections of one length, {@code ejectNanos}, probation included. */
  public WorkerHealth(LongSupplier nanoClock, int unreachableAfter, int ejectAfterErrors, long ejectNanos) {
    this(nanoClock, unreachableAfter, ejectAfterErrors, ejectNanos, ejectNanos);
  }

  /**
   * @param unreachableAfter consecutive failed scrapes that mark a worker unhealthy (0 disables)
   * @param ejectAfterErrors consecutive 5xx responses that eject a worker (0 disables)
   * @param ejectNanos how long a first ejection lasts
   * @param maxEjectNanos the longest ejection, however often a worker on probation fails again
   */
  public WorkerHealth(LongSupplier nanoClock, int unreachableAfter, int ejectAfterErrors, long ejectNanos,
      long maxEjectNanos) {
    if (ejectNanos < 0 || maxEjectNanos < ejectNanos) {
      throw new IllegalArgumentException("need 0 <= ejectNanos <= maxEjectNanos");
    }
    this.nanoClock = nanoClock;
    this.unreachableAfter = unreachableAfter;
    this.ejectAfterErrors = ejectAfterErrors;
    this.ejectNanos = ejectNanos;
    this.maxEjectNanos = maxEjectNanos;
  }

  /** Always healthy: for routers without health signals (tests, embedding). */
  public static WorkerHealth alwaysHealthy() {
    return new WorkerHealth(System::nanoTime, 0, 0, 0);
  }

  public void scrapeReached(String worker) {
    State s = state(worker);
    if (s != null && s.unreachable.getAndSet(0) >= unreachableAfter && unreachableAfter > 0) {
      log.info("worker {} is reachable again", worker);
    }
  }

  public void scrapeUnreachable(String worker) {
    State s = state(worker);
    if (s != null && s.unreachable.incrementAndGet() == unreachableAfter) {
      log.warn("worker {} marked unhealthy: {} scrapes in a row could not reach it", worker, unreachableAfter);
    }
  }

  /** A response status from the worker (Envoy's local 503 for a failed connection counts too). */
  public void response(String worker, int status) {
    if (ejectAfterErrors <= 0 || status <= 0) {
      return;
    }
    State s = state(worker);
    if (s == null) {
      return;
    }
    long now = nanoClock.getAsLong();
    synchronized (s) {
      if (status < 500) {
        s.errors = 0;
        s.ejections = 0; // answered well: off probation
        return;
      }
      if (s.ejectedUntil != 0 && now - s.ejectedUntil < 0) {
        return; // ejected already: these are requests sent before it, they say nothing new
      }
      if (s.ejections == 0 && ++s.errors < ejectAfterErrors) {
        return;
      }
      long length = ejectNanos;
      for (int i = 0; i < s.ejections && length < maxEjectNanos; i++) {
        length *= 2;
      }
      length = Math.min(length, maxEjectNanos);
      s.ejections++;
      s.errors = 0;
      s.ejectedUntil = now + length;
      if (s.ejections == 1) {
        log.warn("worker {} ejected for {} ms after {} consecutive 5xx responses", worker, length / 1_000_000,
            ejectAfterErrors);
      } else {
        log.warn("worker {} ejected again for {} ms: a 5xx on probation (ejection {} in a row)", worker,
            length / 1_000_000, s.ejections);
      }
    }
  }

  /** Null when healthy, otherwise why not ({@link #UNREACHABLE} or {@link #EJECTED}). */
  public String unhealthyReason(String worker) {
    State s = workers.get(worker);
    if (s == null) {
      return null;
    }
    if (unreachableAfter > 0 && s.unreachable.get() >= unreachableAfter) {
      return UNREACHABLE;
    }
    long until = s.ejectedUntil;
    if (until != 0 && nanoClock.getAsLong() - until < 0) {
      return EJECTED;
    }
    return null;
  }

  /** Forgets workers that left the fleet, and takes no report of theirs from then on. */
  public void retain(Collection<String> names) {
    workers.retain(names);
  }

  /** The worker's state, made on its first report; null for a worker outside the fleet. */
  private State state(String worker) {
    return workers.inFleet(worker, k -> new State());
  }

  private static final class State {
    final AtomicInteger unreachable = new AtomicInteger();
    /** Consecutive 5xx outside probation; guarded by this. */
    int errors;
    /** Ejections since the worker last answered well (> 0: on probation once it ends); guarded by this. */
    int ejections;
    /** Written under this, read without: the decision path only reads. */
    volatile long ejectedUntil;
  }
}
