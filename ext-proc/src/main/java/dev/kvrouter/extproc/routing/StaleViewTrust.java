package dev.kvrouter.extproc.routing;

import dev.kvrouter.index.WorkerId;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.concurrent.ConcurrentHashMap;

/**
 * How far each stale worker view has been confirmed by the worker's own usage reports since it went stale.
 *
 * <p>A gap in a worker's events that replay did not fill (vLLM publishes without a replay socket by default) makes
 * its view stale: the lost batches may have removed blocks the view still claims, so the router stops crediting
 * the view and scores the worker on its own predicted entries until {@code events.stale_recovery_ms} passes
 * without a new gap. At a steady loss rate that never happens, and the router forgets most of what the view knows
 * (RAG at 10% batch loss: 78% of the prompt served from cache instead of 91%).
 *
 * <p>The view can be tested, though: every request routed to the worker reports how many of its prompt tokens
 * the engine found cached ({@code usage.prompt_tokens_details.cached_tokens}). Of the blocks the stale view
 * claimed beyond what the router's own predictions already covered, the report says how many were really there.
 * The share confirmed over recent requests ({@link #trust}) is the discount at which the cost model credits the
 * stale view. It starts at half ({@link #PRIOR}): a view whose lost batches removed nothing it is asked about
 * climbs back to full credit within a few requests, and one that claims evicted blocks falls to nearly none at
 * its first long miss. Blocks the predictions cover are left out of the test because they are there whatever the
 * view says (the router just sent them), so they would confirm any view.
 *
 * <p>Evidence counts only while the view stays stale: it is forgotten when the view goes stale (a view that was
 * exact proves nothing about the batches just lost) and when it is exact again. Recent requests weigh more
 * ({@link #DECAY} per report), so a new gap that lost removals shows within a few requests.
 *
 * <p>Thread-safe: reports arrive on response threads, {@link #trust} is read by the router, transitions come from
 * event threads. Holds one small record per stale worker, created and dropped by {@link #staleChanged}; a report
 * that arrives after its worker went fresh again finds none and is ignored.
 */
public final class StaleViewTrust {

  /**
   * The trust of a view that has just gone stale, before any report: half. At 0 the router would route nothing
   * to a stale worker for its view, so the view would never be tested (at 10% batch loss RAG served 87.8% of its
   * prompts from cache with no prior, 89.3% with half, no better with more; Mooncake 30.5% and 32.4%;
   * docs/benchmarks/ab.md, "Stale views credited as far as usage confirms them").
   */
  static final double PRIOR = 0.5;

  /**
   * The prior's weight, in claimed blocks (1,024 tokens at block 16): one report of a long prompt outweighs it, a
   * few short ones do. So a view whose lost batches removed what it claims (a lost cache clear) loses its credit
   * at the first long request that finds nothing (trust 0.05 after a 500-block miss).
   */
  static final double PRIOR_BLOCKS = 64;

  /** Weight of the previous evidence at each new report: the last ten or so reports carry the figure. */
  static final double DECAY = 0.9;

  /** Trusts nothing: every stale view scored on predicted entries alone, as before this existed. */
  public static final StaleViewTrust NONE = new StaleViewTrust(false);

  private final boolean enabled;
  private final ConcurrentHashMap<WorkerId, Evidence> evidence = new ConcurrentHashMap<>();

  private volatile MeterRegistry meters;

  /** Decayed sums of claimed and confirmed blocks, starting from the prior. */
  private static final class Evidence {
    double claimed = PRIOR_BLOCKS;
    double confirmed = PRIOR * PRIOR_BLOCKS;
    volatile double trust = PRIOR;
    Gauge gauge;
  }

  public StaleViewTrust() {
    this(true);
  }

  private StaleViewTrust(boolean enabled) {
    this.enabled = enabled;
  }

  public boolean enabled() {
    return enabled;
  }

  /**
   * Exports {@code kvrouter_events_stale_view_trust{worker, dp_rank}} for each stale worker while it is stale:
   * beside {@code kvrouter_events_stale}, whether the router still routes on that view.
   */
  public StaleViewTrust bindTo(MeterRegistry registry) {
    this.meters = registry;
    return this;
  }

  /**
   * The share of {@code worker}'s stale view confirmed lately, in [0, 1]: {@link #PRIOR} until a report tests
   * it; 0 for a worker not seen going stale (the cost model credits a fresh view in full anyway) and when
   * disabled.
   */
  public double trust(WorkerId worker) {
    Evidence e = evidence.get(worker);
    return e == null ? 0 : e.trust;
  }

  /** {@link #report(WorkerId, Overlap, RequestShape, long)} for a routed decision's chosen worker. */
  public void report(Decision d, long actualCachedTokens) {
    Candidate chosen = d.detail().chosen();
    if (chosen != null) {
      report(chosen.id(), chosen.overlap(), d.detail().shape(), actualCachedTokens);
    }
  }

  /**
   * Records what the engine reported for a request routed to a worker whose view was stale at its decision.
   *
   * @param worker the chosen worker
   * @param overlap the chosen worker's overlap at the decision
   * @param shape the request's shape
   * @param actualCachedTokens the engine's {@code cached_tokens} of a successful response followed to its end;
   *     negative when the response did not report it, which confirms nothing: a worker that never reports (vLLM
   *     without {@code --enable-prompt-tokens-details}) sees its stale view's credit fall to nothing, the rule
   *     before this class
   */
  public void report(WorkerId worker, Overlap overlap, RequestShape shape, long actualCachedTokens) {
    if (!enabled || !overlap.stale() || shape.promptTokens() <= 0) {
      return;
    }
    // vLLM computes at least the last prompt token, so a hit is capped below the prompt's full blocks
    int cap = (int) Math.min(shape.fullBlocks(), (shape.promptTokens() - 1) / shape.blockSize());
    int predicted = Math.min(overlap.predicted(), cap);
    int claimed = Math.min(overlap.cached(), cap) - predicted;
    if (claimed <= 0) {
      return; // nothing the view claimed beyond the router's own predictions: no test of the view
    }
    long actualBlocks = actualCachedTokens < 0 ? 0 : actualCachedTokens / shape.blockSize();
    int confirmed = (int) Math.max(0, Math.min(claimed, actualBlocks - predicted));
    Evidence e = evidence.get(worker);
    if (e == null) {
      return; // fresh again (or gone) since the decision: the view it tested is no longer the one in use
    }
    synchronized (e) {
      e.claimed = e.claimed * DECAY + claimed;
      e.confirmed = e.confirmed * DECAY + confirmed;
      e.trust = e.confirmed / e.claimed;
    }
  }

  /**
   * The worker's view went stale (evidence starts from nothing: a view that was exact proves nothing about the
   * batches just lost) or fresh again, or the worker left (forgotten). Register it with the event plane's health
   * ({@code EventPlaneHealth.addListener}): reports count only for workers it has seen go stale. Quick and
   * non-blocking, as the event threads that call it require.
   */
  public void staleChanged(WorkerId worker, boolean stale, String reason) {
    MeterRegistry m = meters;
    Evidence old = evidence.remove(worker);
    if (m != null && old != null && old.gauge != null) {
      m.remove(old.gauge);
    }
    if (stale && enabled) {
      Evidence e = new Evidence();
      if (m != null) {
        e.gauge = Gauge.builder("kvrouter.events.stale.view.trust", e, x -> x.trust)
            .tags("worker", worker.name(), "dp_rank", Integer.toString(worker.dpRank()))
            .description("share of a stale worker view's credit the router still gives it (confirmed by usage)")
            .register(m);
      }
      evidence.put(worker, e);
    }
  }

  /** Workers followed now: the stale ones. */
  public int tracked() {
    return evidence.size();
  }
}
