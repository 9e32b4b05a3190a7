package dev.kvrouter.index.events;

import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.WorkerView;
import java.util.List;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Health of one worker's event stream: counters, last event time, lag, and the stale flag with its reason.
 *
 * <p>Single writer (the event thread following this worker); any thread may read. Counters use lazy writes:
 * a reader may see a value a moment old, never a torn one.
 *
 * <p>Stale means "this worker's view may claim blocks the engine no longer holds": set on a sequence gap that
 * replay did not fill, an undecodable batch, or an unknown parent on a stream we followed from its start;
 * cleared when the view becomes exact again (replay filled the gap, the engine cleared its cache or
 * restarted) or, if configured, after a quiet period with no new cause.
 */
public final class WorkerEventHealth {

  private final WorkerId id;
  private final WorkerView view;
  private final long recoveryMillis;
  private final List<StaleListener> listeners;
  private final AtomicLongArray counters = new AtomicLongArray(EventCounter.values().length);
  private volatile long lastEventMillis = -1;
  private volatile long lagMillis;
  private volatile long lastSeq = -1;
  private volatile boolean stale;
  private volatile String staleReason = "";
  private volatile long bufferBytes;
  private long lastCauseMillis;

  WorkerEventHealth(WorkerId id, WorkerView view, long recoveryMillis, List<StaleListener> listeners) {
    this.id = id;
    this.view = view;
    this.recoveryMillis = recoveryMillis;
    this.listeners = listeners;
  }

  public WorkerId id() {
    return id;
  }

  public long count(EventCounter c) {
    return counters.get(c.ordinal());
  }

  void add(EventCounter c, long n) {
    if (n != 0) {
      int i = c.ordinal();
      counters.lazySet(i, counters.get(i) + n);
    }
  }

  void inc(EventCounter c) {
    add(c, 1);
  }

  /** Epoch millis of the last batch received, or -1 if none yet. */
  public long lastEventMillis() {
    return lastEventMillis;
  }

  /** Receive time minus the engine's batch timestamp for the last batch (clock skew included). */
  public long lagMillis() {
    return lagMillis;
  }

  /** Last sequence number applied in the current publisher lifetime, -1 if none. */
  public long lastSeq() {
    return lastSeq;
  }

  /** Bytes of the worker's batch buffer, which grows to its largest batch and shrinks after a run of small ones. */
  public long bufferBytes() {
    return bufferBytes;
  }

  void bufferBytes(long bytes) {
    bufferBytes = bytes;
  }

  void received(long nowMillis, double batchTs, long seq) {
    lastEventMillis = nowMillis;
    lagMillis = nowMillis - (long) (batchTs * 1000.0);
    lastSeq = seq;
  }

  void resetSeq() {
    lastSeq = -1;
  }

  public boolean stale() {
    return stale;
  }

  public String staleReason() {
    return staleReason;
  }

  /** The worker's view, whose blocks count is exported with the health. */
  WorkerView view() {
    return view;
  }

  void markStale(String reason, long nowMillis) {
    lastCauseMillis = nowMillis;
    staleReason = reason;
    if (!stale) {
      stale = true;
      view.setStale(true);
      notifyListeners(true, reason);
    }
  }

  void markFresh(String reason) {
    if (stale) {
      stale = false;
      staleReason = "";
      view.setStale(false);
      notifyListeners(false, reason);
    }
  }

  /** Clears staleness after the configured quiet period with no new cause. */
  void tick(long nowMillis) {
    if (stale && recoveryMillis > 0 && nowMillis - lastCauseMillis >= recoveryMillis) {
      markFresh("no new staleness cause for " + recoveryMillis + " ms");
    }
  }

  private void notifyListeners(boolean s, String reason) {
    notifyListeners(listeners, id, s, reason);
  }

  static void notifyListeners(List<StaleListener> listeners, WorkerId id, boolean s, String reason) {
    for (StaleListener l : listeners) {
      try {
        l.staleChanged(id, s, reason);
      } catch (RuntimeException e) {
        // a listener's bug must not stop the event thread
        org.slf4j.LoggerFactory.getLogger(WorkerEventHealth.class).warn("stale listener failed", e);
      }
    }
  }

  /** An immutable copy for status pages and tests. */
  public Snapshot snapshot(long nowMillis) {
    long[] c = new long[EventCounter.values().length];
    for (int i = 0; i < c.length; i++) {
      c[i] = counters.get(i);
    }
    long last = lastEventMillis;
    String notClosed = view.notPrefixClosed();
    return new Snapshot(id, c, last < 0 ? -1 : nowMillis - last, lagMillis, lastSeq, stale, staleReason,
        view.size(), view.open(), notClosed == null ? "" : notClosed);
  }

  /**
   * A copy of a worker's event-plane health.
   *
   * @param lastEventAgeMillis time since the last batch, -1 if none yet (vLLM sends no heartbeats: an idle
   *     engine is silent, so age alone does not mean stale)
   * @param walked lookups read every block of this worker instead of jump-searching it ({@link WorkerView#open})
   * @param notPrefixClosed why the worker's engine is treated as not prefix-closed, {@code ""} if it is not
   */
  public record Snapshot(WorkerId worker, long[] counters, long lastEventAgeMillis, long lagMillis, long lastSeq,
      boolean stale, String staleReason, int blocks, boolean walked, String notPrefixClosed) {

    public long count(EventCounter c) {
      return counters[c.ordinal()];
    }
  }
}
