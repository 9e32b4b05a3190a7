package dev.kvrouter.extproc.decision;

import com.google.protobuf.ByteString;
import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.WorkerHealth;
import dev.kvrouter.extproc.routing.Decision;
import dev.kvrouter.extproc.routing.StaleViewTrust;
import dev.kvrouter.extproc.server.RequestListener;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Follows each routed request after its decision: releases its load reservation (prefill at the first response
 * byte, the rest at the end, cancel or reset), reports response statuses to {@link WorkerHealth}, reads the
 * worker's usage for the truth check (and for {@link StaleViewTrust}), and writes the decision and outcome
 * records and metrics.
 *
 * <p>The decision line is written after the request has left for the worker (at its first response event), so
 * rendering it never delays routing; rejections are written at once. Per-request state lives in a map keyed by
 * {@link Decision#seq()}, bounded by {@code maxTracked} (beyond it a request is still released and recorded,
 * without a truth check) and swept of entries older than the ledger's TTL.
 *
 * <p>Threading: {@link RequestListener} calls for one request come one at a time, in order (from its routing
 * stream, its observer, and possibly its routing stream again for the end, handed over through an atomic that
 * publishes the observer's writes); different requests run concurrently. {@link #sweep} runs on the runtime's
 * owner thread.
 */
public final class DecisionTracker implements RequestListener {

  private static final Logger log = LoggerFactory.getLogger(DecisionTracker.class);

  private final LoadLedger ledger;
  private final WorkerHealth health;
  private final StaleViewTrust staleViewTrust;
  private final DecisionLog records;
  private final DecisionMetrics metrics;
  private final LongSupplier nanoClock;
  private final int maxTracked;
  private final long ttlNanos;
  private final ConcurrentHashMap<Long, Tracked> tracked = new ConcurrentHashMap<>();
  private final LongAdder untracked = new LongAdder();

  private static final class Tracked {
    final Decision decision;
    final long startNanos;
    final UsageScanner usage = new UsageScanner();
    int status;
    long firstByteNanos = -1;
    boolean followed = true;
    boolean logged;

    Tracked(Decision decision, long startNanos) {
      this.decision = decision;
      this.startNanos = startNanos;
    }

    /** Not refused: a 2xx, or no status seen (an observer config without response headers). */
    boolean succeeded() {
      return status == 0 || status / 100 == 2;
    }
  }

  /**
   * @param ledger where reservations are released (null: none)
   * @param maxTracked requests followed at once at most
   * @param ttlNanos state older than this is dropped by {@link #sweep}
   */
  public DecisionTracker(LoadLedger ledger, WorkerHealth health, DecisionLog records, DecisionMetrics metrics,
      LongSupplier nanoClock, int maxTracked, long ttlNanos) {
    this(ledger, health, StaleViewTrust.NONE, records, metrics, nanoClock, maxTracked, ttlNanos);
  }

  /** @param staleViewTrust told each followed response's cached tokens, so it can test stale views */
  public DecisionTracker(LoadLedger ledger, WorkerHealth health, StaleViewTrust staleViewTrust, DecisionLog records,
      DecisionMetrics metrics, LongSupplier nanoClock, int maxTracked, long ttlNanos) {
    this.ledger = ledger;
    this.health = health;
    this.staleViewTrust = staleViewTrust;
    this.records = records;
    this.metrics = metrics;
    this.nanoClock = nanoClock;
    this.maxTracked = maxTracked;
    this.ttlNanos = ttlNanos;
  }

  @Override
  public void onDecision(Decision d) {
    metrics.decision(d);
    if (!d.routed()) {
      write(d);
      return;
    }
    if (tracked.size() >= maxTracked) {
      untracked.increment();
      write(d);
      return;
    }
    if (!records.enabled()) {
      d.detail().releaseCandidates();
    }
    tracked.put(d.seq(), new Tracked(d, nanoClock.getAsLong()));
  }

  /** Writes the decision line, then drops the candidates the decision would otherwise keep while in flight. */
  private void write(Decision d) {
    write(d, 0);
  }

  private void write(Decision d, long ageNanos) {
    try {
      records.decision(d, ageNanos);
    } catch (RuntimeException e) {
      log.warn("could not record decision {}", d.id(), e);
    } finally {
      d.detail().releaseCandidates();
    }
  }

  @Override
  public void onRefused(String reason) {
    metrics.refused(reason);
  }

  @Override
  public void onAbandoned() {
    metrics.abandoned();
  }

  @Override
  public void onUnexpectedMessage(String message) {
    metrics.unexpectedMessage(message);
  }

  @Override
  public void onResponseHeaders(Decision d, int status) {
    if (!d.routed()) {
      return;
    }
    health.response(d.chosen().name(), status);
    Tracked t = tracked.get(d.seq());
    if (t != null) {
      t.status = status;
      logDecision(t);
    }
  }

  @Override
  public void onResponseBody(Decision d, ByteString chunk, boolean first, boolean endOfStream) {
    if (!d.routed()) {
      return;
    }
    if (first && ledger != null) {
      ledger.prefillDone(d.reservation());
    }
    Tracked t = tracked.get(d.seq());
    if (t != null) {
      logDecision(t);
      if (first) {
        t.firstByteNanos = nanoClock.getAsLong();
      }
      if (t.succeeded()) {
        t.usage.feed(chunk.asReadOnlyByteBuffer());
      }
    }
  }

  @Override
  public void onObserverLeft(Decision d) {
    Tracked t = tracked.get(d.seq());
    if (t != null) {
      t.followed = false;
    }
  }

  @Override
  public void onEnd(Decision d, boolean aborted) {
    if (!d.routed()) {
      return;
    }
    if (ledger != null) {
      ledger.release(d.reservation());
    }
    Tracked t = tracked.remove(d.seq());
    if (t == null) {
      return;
    }
    logDecision(t);
    long now = nanoClock.getAsLong();
    TruthCheck truth = t.followed
        ? new TruthCheck(d.detail().predictedCachedTokens(), t.usage.cachedTokens(), d.detail().shape().blockSize())
        : TruthCheck.skipped(d.detail().predictedCachedTokens(), d.detail().shape().blockSize());
    if (t.followed && !aborted && t.succeeded()) {
      staleViewTrust.report(d, t.usage.cachedTokens());
    }
    long ttft = t.firstByteNanos >= 0 && d.detail().stream() ? t.firstByteNanos - t.startNanos : -1;
    long duration = now - t.startNanos;
    try {
      metrics.outcome(d, truth, ttft, duration);
      records.outcome(d, t.status, aborted, truth, t.usage.promptTokens(), ttft >= 0 ? ttft / 1e6 : -1,
          duration / 1e6);
    } catch (RuntimeException e) {
      log.warn("could not record the outcome of {}", d.id(), e);
    }
  }

  private void logDecision(Tracked t) {
    synchronized (t) { // the request's own events and, after the TTL, the sweeper may both get here
      if (t.logged) {
        return;
      }
      t.logged = true;
    }
    write(t.decision, nanoClock.getAsLong() - t.startNanos);
  }

  /** Drops state of requests whose end never arrived. Owner thread. */
  public int sweep() {
    long now = nanoClock.getAsLong();
    int n = 0;
    for (Tracked t : tracked.values()) {
      if (now - t.startNanos > ttlNanos && tracked.remove(t.decision.seq(), t)) {
        logDecision(t); // every decision gets its line, even one whose response never showed up
        n++;
      }
    }
    return n;
  }

  /** Requests followed now. */
  public int tracking() {
    return tracked.size();
  }

  /** Requests not followed because the map was full. */
  public long untracked() {
    return untracked.sum();
  }
}
