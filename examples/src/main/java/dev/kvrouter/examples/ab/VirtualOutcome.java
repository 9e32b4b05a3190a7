package dev.kvrouter.examples.ab;

import dev.kvrouter.examples.report.RunData;
import java.util.Map;

/**
 * One virtual-time run: the report's {@link RunData} plus what only an in-process run can check exactly.
 *
 * @param data the run, as the report summarizes it
 * @param truth predicted versus actual cached tokens (the router's truth check) over completed requests
 * @param ledger the load ledger once every request finished (every counter must be zero)
 * @param wallSeconds wall time of the replay (clock loop), without building the workload
 * @param simulatedSeconds virtual time at the end
 * @param routerCpuNanos CPU time of the router's own work: hashing, routing, event decoding and application,
 *     ledger releases, index maintenance
 * @param fallbacks decisions by fallback token ({@code stale_events}, {@code no_tokenization}, ...)
 * @param events the event plane: batches delivered, dropped by faults, gaps seen, replays, stale transitions
 * @param indexBytes the KV index's estimated footprint at the end
 * @param busyShare per worker, the share of the run (first arrival to last response) its engine spent in steps
 * @param evictionShare the model's eviction share at the router's decisions with block hashes, averaged
 *     ({@code EvictionPressure}: prompt blocks the fleet had computed and evicted everywhere, as the router saw them)
 * @param missBreakdown where the computed prompt blocks could have come from ({@link MissBreakdown#toJson}), or
 *     null when the run did not measure it
 */
public record VirtualOutcome(RunData data, Truth truth, LedgerEnd ledger, double wallSeconds,
    double simulatedSeconds, long routerCpuNanos, Map<String, Long> fallbacks, Map<String, Long> events,
    long indexBytes, double[] busyShare, double evictionShare, java.util.Map<String, Object> missBreakdown) {

  /**
   * @param withinBlock |predicted - actual| below one block
   * @param over the router expected at least a block more than the worker had
   * @param under the worker had at least a block more than the router expected
   * @param predictedTokens sum of predicted cached tokens
   * @param actualTokens sum of the workers' cached tokens
   */
  public record Truth(long withinBlock, long over, long under, long predictedTokens, long actualTokens) {

    public long checked() {
      return withinBlock + over + under;
    }

    public double withinShare() {
      return checked() == 0 ? 1.0 : (double) withinBlock / checked();
    }
  }

  /**
   * @param prefillTokens active prefill tokens over all workers
   * @param decodeBlocks active blocks over all workers
   * @param requests in-flight requests over all workers
   * @param activeHashes distinct active block hashes
   * @param contextBlocks context blocks (per request, not deduplicated) over all workers
   * @param live live reservations
   * @param expired reservations released by the TTL sweep rather than by their response
   */
  public record LedgerEnd(long prefillTokens, long decodeBlocks, long requests, long activeHashes,
      long contextBlocks, long live, long expired) {

    public boolean zero() {
      return prefillTokens == 0 && decodeBlocks == 0 && requests == 0 && activeHashes == 0 && contextBlocks == 0
          && live == 0;
    }
  }
}
