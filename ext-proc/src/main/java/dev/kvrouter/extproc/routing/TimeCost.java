package dev.kvrouter.extproc.routing;

/**
 * The time model (opt-in, {@code time_prefill_us_per_token} above 0): a candidate's cost is the time, in
 * milliseconds, the engine's linear step model predicts the request costs there, its own and the time it takes
 * from the requests already running:
 *
 * <pre>
 *   uncached = max(prompt_tokens - credit x block_size, 0)
 *   steps    = max(1, (queued_prefill_tokens + uncached) / step_tokens)   (1 while step_tokens is 0)
 *   step     = time_step_us + time_step_us_per_ktoken x resident / 1000   a decode step there now
 *   ttft     = steps x step + time_prefill_us_per_token x (queued_prefill_tokens + uncached)
 *   own      = output_tokens x (step + time_step_us_per_ktoken x life / 1000)
 *   others   = running x (time_prefill_us_per_token x uncached + output_tokens x time_step_us_per_ktoken x life / 1000)
 *   cost     = (ttft + own + others) / 1000 / worker weight
 *   resident = the worker's context tokens in flight (summed per request, as decode steps read them)
 *   life     = prompt_tokens + output_tokens / 2   (the request's mean context while it decodes)
 * </pre>
 *
 * <p>{@code others} is what the block model's {@code new_prefill_weight} and decode weights stand in for: every
 * sequence decoding there waits through this request's prefill (chunked prefill shares their steps) and then reads
 * a longer step for every token this request generates. On an idle worker it is zero, so a recomputed prefix costs
 * only the request's own wait, which is what the idle relief grants the block model by hand; on a busy one each
 * recomputed token costs its prefill time once per running request. The terms are the router's own view (index
 * credit, ledger and scraped load), never the engine's; the output length is the configured expectation.
 */
final class TimeCost {

  private TimeCost() {}

  /** Milliseconds for {@code c} with {@code credit} blocks of the prompt cached there. */
  static double cost(Candidate c, double credit, RequestShape shape, int outputTokens, Weights w) {
    double b = shape.blockSize();
    double uncached = Math.max(shape.promptTokens() - credit * b, 0);
    double queued = c.load.prefillTokens();
    // a header can turn the model on without a budget (its keys apply one at a time): one step, as the read term
    double steps = w.stepTokens() > 0 ? Math.max(1, (queued + uncached) / w.stepTokens()) : 1;
    double resident = c.load.contextBlocks() * b;
    double step = w.timeStepUs() + w.timeStepUsPerKtoken() * resident / 1000;
    double ttft = steps * step + w.timePrefillUsPerToken() * (queued + uncached);
    double life = shape.promptTokens() + outputTokens / 2.0;
    double lifeRead = w.timeStepUsPerKtoken() * life / 1000;
    double own = outputTokens * (step + lifeRead);
    double others = c.load.requests() * (w.timePrefillUsPerToken() * uncached + outputTokens * lifeRead);
    return (ttft + own + others) / 1000 / Math.max(1, c.worker().weight());
  }
}
