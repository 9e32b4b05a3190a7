package dev.kvrouter.extproc.routing;

import java.util.List;

/**
 * The routing cost of sending one request to each candidate, lowest wins. Dynamo's current formula
 * (anchors §1.1) plus a term for the prefill the request adds, in blocks:
 *
 * <pre>
 *   credit   = min(full blocks, max(gpu_credit_eff x gpu + cpu_credit x cpu + disk_credit x disk,
 *                                   predicted_credit x predicted))
 *            (stale view: the event term times its view_trust, StaleViewTrust: half, then as usage confirms it)
 *   new      = max(prompt_blocks - credit, 0)
 *   prefill  = max(active_prefill_tokens / block_size + prompt_blocks - credit, 0)
 *   decode   = active_decode_blocks + (prompt_blocks - active_shared_blocks) + output_blocks
 *   read     = active_context_blocks + prompt_blocks + output_blocks
 *   cost     = (prefill_load_scale x prefill + new_weight x new + decode_load_scale x decode
 *               + decode_read_weight x read x steps + active_request_weight x active_requests) / worker weight
 *   steps    = max(1, prefill x block_size / step_tokens)   (1 while step_tokens is 0, the default)
 *   gpu_credit_eff = gpu_credit / (1 + overlap_credit_decay x excess_prefill / prompt_blocks)
 *   excess_prefill = (active_prefill_tokens - least active_prefill_tokens among candidates) / block_size
 *   new_weight = new_prefill_weight x (1 - hot_prefix_relief x hot_excess)
 *                + new_prefill_queue_weight x min(1, mean active_prefill_blocks / prompt_blocks)
 *                + new_prefill_eviction_weight x min(1, eviction_share / eviction_share_full)
 *   hot_excess = min(1, max(0, prefix_heat x owners - 1))   (0 for a prefix one worker can serve alone)
 *   (per candidate, with new_prefill_idle_relief r: new_weight - r x idle^2 x share x the new_prefill_weight part,
 *    idle = max(0, 1 - in-flight requests / (the candidates' mean per unit of weight x its weight)), 1 on an
 *    idle fleet; share = min(1, prefix_heat x owners), 0 for a prefix only this request's session reuses)
 * </pre>
 *
 * <p>With Dynamo's weights (credits 1 / 0.75 / 0.25, scales 1, no decay, no request weight, no new-prefill term) a
 * GPU-cached block saves exactly one block of prefill and a queued prefill block costs exactly one block, so a
 * worker holding the prefix wins until the prefill already queued on it outweighs the prefill it saves: the
 * hot-spot brake. Our default {@code new_prefill_weight} 1 counts a recomputed block twice (this request's wait,
 * and fleet compute later requests wait behind), which breaks the ties that scatter siblings and sessions.
 * Dividing by the worker's {@code weight} treats a weight-2 worker as twice as fast.
 *
 * <p>{@code decode} is the worker's memory: a prefix shared by in-flight requests counts once. {@code read} is its
 * decode traffic: each running sequence's KV is read by every decode step separately (paged attention), so a
 * shared prefix counts once per request that holds it, and a worker holding a popular document reads it once per
 * request on it. With {@code decode_read_weight} 0 (Dynamo) that traffic is invisible to the cost. With
 * {@code step_tokens} set (the engine's per-step token budget) the read counts once per engine step the request
 * waits for its first token: behind more prefill than one step takes, it waits through several steps, each
 * reading every running sequence. That keeps a prefix's holder with a cold prompt queued from looking cheaper
 * than an idle worker merely because fewer requests decode there.
 *
 * <p>{@code new_prefill_idle_relief} prices the fleet compute a recomputed block takes by where it is taken and
 * what the copy is worth: a worker running far fewer requests than the fleet's mean has compute nobody else is
 * queued for, so a copy made there delays no one, and a copy of a prefix many requests reuse (a coding agent's
 * system prompt and tools) takes later requests off its holders, who otherwise pile up decodes at a light load.
 * A copy of a prefix only one session reuses (a conversation's history, a best-of-N group's prompt) serves that
 * session alone, which then waits for it: it keeps the full charge (docs/routing.md, "Idle relief").
 *
 * <p>With {@code time_prefill_us_per_token} set the cost is {@link TimeCost}'s predicted milliseconds instead (the
 * credit as above; the block weights are not read).
 *
 * <p>Pure functions of their inputs; allocation-free.
 */
public final class CostModel {

  private CostModel() {}

  /**
   * The formula on already-computed terms (Dynamo's {@code logit}), {@code newBlocks} being the prefill the
   * request adds itself and {@code readBlocks} the context blocks the worker's decode steps read.
   */
  public static double cost(double prefillBlocks, double newBlocks, double decodeBlocks, double readBlocks,
      long activeRequests, Weights w, int workerWeight) {
    return cost(prefillBlocks, newBlocks, w.newPrefillWeight(), decodeBlocks, readBlocks, activeRequests, w,
        workerWeight);
  }

  private static double cost(double prefillBlocks, double newBlocks, double newWeight, double decodeBlocks,
      double readBlocks, long activeRequests, Weights w, int workerWeight) {
    return (w.prefillLoadScale() * prefillBlocks + newWeight * newBlocks
        + w.decodeLoadScale() * decodeBlocks + w.decodeReadWeight() * readBlocks
        + w.activeRequestWeight() * activeRequests) / Math.max(1, workerWeight);
  }

  /**
   * {@link #score(List, Weights, RequestShape, double, double, double)} for a request whose held prefix no other
   * request reuses.
   */
  public static void score(List<Candidate> candidates, Weights w, RequestShape shape, double evictionShare) {
    score(candidates, w, shape, evictionShare, 0, 0);
  }

  /**
   * Fills the cost terms of every candidate for a request of {@code shape}; {@code evictionShare} is the model's
   * {@link EvictionPressure} share as charged for this request, {@code hotExcess} and {@code ownerShare} its held
   * prefix's {@link EvictionPressure.Reading#hotExcess} and {@link EvictionPressure.Reading#ownerShare}.
   */
  public static void score(List<Candidate> candidates, Weights w, RequestShape shape, double evictionShare,
      double hotExcess, double ownerShare) {
    double b = shape.blockSize();
    long minPrefill = Long.MAX_VALUE;
    if (w.overlapCreditDecay() > 0) {
      for (int i = 0; i < candidates.size(); i++) {
        minPrefill = Math.min(minPrefill, candidates.get(i).load.prefillTokens());
      }
    }
    double baseNew = w.newPrefillWeight() * (1 - w.hotPrefixRelief() * Math.min(1, Math.max(0, hotExcess)));
    double newWeight = baseNew;
    if (w.newPrefillQueueWeight() > 0 && shape.promptBlocks() > 0 && !candidates.isEmpty()) {
      double queued = 0;
      for (int i = 0; i < candidates.size(); i++) {
        queued += candidates.get(i).load.prefillTokens();
      }
      double meanBlocks = queued / b / candidates.size();
      newWeight += w.newPrefillQueueWeight() * Math.min(1.0, meanBlocks / shape.promptBlocks());
    }
    if (w.newPrefillEvictionWeight() > 0 && evictionShare > 0) {
      newWeight += w.newPrefillEvictionWeight() * Math.min(1.0, evictionShare / w.evictionShareFull());
    }
    // the fleet's in-flight requests per unit of worker weight: a weight-2 worker running twice a weight-1 worker's
    // requests is as loaded as it
    // a copy is worth as much as the traffic it can take off the holders: none for a session's own history
    double relief = w.newPrefillIdleRelief() * Math.min(1, Math.max(0, ownerShare));
    double meanRequests = relief > 0 && !candidates.isEmpty()
        ? (double) Candidate.totalRequests(candidates) / Candidate.totalWeight(candidates) : 0;
    for (int i = 0; i < candidates.size(); i++) {
      Candidate c = candidates.get(i);
      Overlap o = c.overlap;
      double candidateNew = newWeight;
      if (relief > 0) {
        // squared: a worker just under the mean gets almost none of it. Linear relief moved sessions off their
        // holders at rho 0.9 too (coding-agent TTFT p99 147 -> 162 ms against 151 squared)
        double idle = meanRequests <= 0 ? 1
            : Math.max(0, 1 - c.load.requests() / (meanRequests * c.weight()));
        candidateNew -= baseNew * relief * idle * idle;
      }
      double gpuCredit = w.gpuCredit();
      if (w.overlapCreditDecay() > 0 && shape.promptBlocks() > 0) {
        double excess = (c.load.prefillTokens() - minPrefill) / b;
        gpuCredit = gpuCredit / (1 + w.overlapCreditDecay() * excess / shape.promptBlocks());
      }
      double eventCredit = gpuCredit * o.gpu() + w.cpuCredit() * o.cpu() + w.diskCredit() * o.disk();
      if (o.stale()) {
        eventCredit *= c.viewTrust;
      }
      double credit = Math.min(Math.max(eventCredit, w.predictedCredit() * o.predicted()), shape.fullBlocks());
      double activePrefill = c.load.prefillTokens() / b;
      double prefill = Math.max(activePrefill + shape.promptBlocks() - credit, 0);
      int shared = Math.min(c.activeSharedBlocks, shape.fullBlocks());
      double decode = c.load.decodeBlocks() + (shape.promptBlocks() - shared) + shape.outputBlocks();
      double read = c.load.contextBlocks() + shape.promptBlocks() + shape.outputBlocks();
      int weight = c.worker().weight();
      c.creditBlocks = credit;
      c.prefillBlocks = prefill;
      c.decodeBlocks = decode;
      c.readBlocks = read;
      double added = Math.max(shape.promptBlocks() - credit, 0);
      double steps = w.stepTokens() > 0 ? Math.max(1, prefill * b / w.stepTokens()) : 1;
      c.readSteps = steps;
      c.cost = w.timeModel()
          ? TimeCost.cost(c, credit, shape, shape.outputBlocks() * shape.blockSize(), w)
          : cost(prefill, added, candidateNew, decode, read * steps, c.load.requests(), w, weight);
      c.loadCost = cost(activePrefill, 0, c.load.decodeBlocks(), c.load.contextBlocks(), c.load.requests(), w,
          weight);
      c.scored = true;
    }
  }

  /**
   * Cached tokens the router expects the engine to report for the request on {@code c}: the effective overlap
   * in tokens, capped as vLLM caps a prefix hit (at least the last prompt token is always computed, and hits
   * are whole blocks).
   */
  public static long predictedCachedTokens(Overlap o, RequestShape shape) {
    if (shape.promptTokens() <= 0) {
      return 0;
    }
    long maxBlocks = (shape.promptTokens() - 1) / shape.blockSize();
    long blocks = Math.min(Math.min(o.effective(), shape.fullBlocks()), maxBlocks);
    return blocks * shape.blockSize();
  }
}
