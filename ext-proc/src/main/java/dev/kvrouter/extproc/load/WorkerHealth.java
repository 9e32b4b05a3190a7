package dev.kvrouter.extproc.load;

import java.util.Collection;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
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
 *       {@code ejectNanos}; any non-5xx response resets the streak.
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

  private final ConcurrentHashMap<String, State> workers = new ConcurrentHashMap<>();
  private final LongSupplier nanoClock;
  private final int unreachableAfter;
  private final int ejectAfterErrors;
  private final long ejectNanos;

  /**
   * @param unreachableAfter consecutive failed scrapes that mark a worker unhealthy (0 disables)
   * @param ejectAfterErrors consecutive 5xx responses that eject a worker (0 disables)
   * @param ejectNanos how long an ejection lasts
   */
  public WorkerHealth(LongSupplier nanoClock, int unreachableAfter, int ejectAfterErrors, long ejectNanos) {
    this.nanoClock = nanoClock;
    this.unreachableAfter = unreachableAfter;
    this.ejectAfterErrors = ejectAfterErrors;
    this.ejectNanos = ejectNanos;
  }

  /** Always healthy: for routers without health signals (tests, embedding). */
  public static WorkerHealth alwaysHealthy() {
    return new WorkerHealth(System::nanoTime, 0, 0, 0);
  }

  public void scrapeReached(String worker) {
    State s = state(worker);
    if (s.unreachable.getAndSet(0) >= unreachableAfter && unreachableAfter > 0) {
      log.info("worker {} is reachable again", worker);
    }
  }

  public void scrapeUnreachable(String worker) {
    int n = state(worker).unreachable.incrementAndGet();
    if (n == unreachableAfter) {
      log.warn("worker {} marked unhealthy: {} scrapes in a row could not reach it", worker, n);
    }
  }

  /** A response status from the worker (Envoy's local 503 for a failed connection counts too). */
  public void response(String worker, int status) {
    if (ejectAfterErrors <= 0 || status <= 0) {
      return;
    }
    State s = state(worker);
    if (status >= 500) {
      if (s.errors.incrementAndGet() >= ejectAfterErrors) {
        s.errors.set(0);
        s.ejectedUntil = nanoClock.getAsLong() + ejectNanos;
        log.warn("worker {} ejected for {} ms after {} consecutive 5xx responses", worker, ejectNanos / 1_000_000,
            ejectAfterErrors);
      }
    } else {
      s.errors.set(0);
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

  /** Forgets workers that left the fleet. */
  public void retain(Collection<String> names) {
    Set<String> keep = new HashSet<>(names);
    workers.keySet().retainAll(keep);
  }

  private State state(String worker) {
    return workers.computeIfAbsent(worker, k -> new State());
  }

  private static final class State {
    final AtomicInteger unreachable = new AtomicInteger();
    final AtomicInteger errors = new AtomicInteger();
    volatile long ejectedUntil;
  }
}
