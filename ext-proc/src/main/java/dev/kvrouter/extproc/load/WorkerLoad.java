package dev.kvrouter.extproc.load;

/**
 * One worker's load as the routing decision uses it: the router's own ledger blended with what the worker last
 * reported (see {@link LoadTracker} for the rule).
 *
 * @param prefillTokens prompt tokens waiting to be prefilled
 * @param decodeBlocks KV blocks held by requests in flight (shared prefixes once: memory)
 * @param contextBlocks context blocks of the requests in flight, summed per request (what a decode step reads)
 * @param requests requests in flight (running plus queued)
 * @param waiting requests queued in the engine as last scraped, -1 when unknown
 * @param kvUsage fraction of the KV cache in use, NaN when unknown
 * @param scraped whether a fresh scrape contributed
 */
public record WorkerLoad(
    long prefillTokens, long decodeBlocks, long contextBlocks, long requests, long waiting, double kvUsage,
    boolean scraped) {

  public static final WorkerLoad ZERO = new WorkerLoad(0, 0, 0, 0, -1, Double.NaN, false);
}
