package dev.kvrouter.extproc.load;

import dev.kvrouter.index.WorkerId;
import java.util.function.LongSupplier;

/**
 * The load view the routing decision reads: the router's own {@link LoadLedger} blended with the workers'
 * scraped metrics, so several router replicas that share nothing still see each other's traffic.
 *
 * <p>The blend rule, per worker and signal: {@code max(local, scraped + local since that scrape)}.
 *
 * <ul>
 *   <li>requests: {@code max(local in-flight, running + waiting + local reserved since the scrape)};
 *   <li>decode blocks: {@code max(local blocks, kv_usage x num_gpu_blocks + local blocks added since the
 *       scrape)} when the worker reports its capacity, else local only;
 *   <li>context blocks: {@code max(local context, requests (as blended above) x local context per request)},
 *       the per-request mean being this worker's in this replica, or the replica's overall mean when it has
 *       none there (engines export no per-request context; with one router replica this is the local figure);
 *   <li>prefill tokens: {@code max(local, local since the scrape + waiting x mean prefill tokens per request)}
 *       (engines do not export queued prompt tokens; the router's own mean stands in);
 *   <li>KV usage: the scraped fraction, or local blocks over capacity when that is higher.
 * </ul>
 *
 * <p>The local term is exact for this replica and immediate; the scraped term catches other replicas' and
 * direct traffic with one scrape interval of delay; adding the local reservations made since the scrape keeps
 * this replica's burst visible between scrapes without counting it twice (the next scrape includes it and
 * resets the "since" counters). A scrape older than {@code maxAgeNanos} is ignored: local only.
 *
 * <p>Stateless apart from its sources; safe for any thread.
 */
public final class LoadTracker {

  private final LoadLedger ledger;
  private final ScrapedLoadSource scraped;
  private final LongSupplier nanoClock;
  private final long maxAgeNanos;

  public LoadTracker(LoadLedger ledger, ScrapedLoadSource scraped, LongSupplier nanoClock, long maxAgeNanos) {
    this.ledger = ledger;
    this.scraped = scraped;
    this.nanoClock = nanoClock;
    this.maxAgeNanos = maxAgeNanos;
  }

  public LoadLedger ledger() {
    return ledger;
  }

  public WorkerLoad load(WorkerId worker) {
    LocalLoad l = ledger.local(worker);
    ScrapedLoad s = scraped.scraped(worker);
    if (s == null) {
      return new WorkerLoad(l.prefillTokens(), l.decodeBlocks(), l.contextBlocks(), l.requests(), -1, Double.NaN,
          false);
    }
    double localUsage = s.numGpuBlocks() > 0 ? (double) l.decodeBlocks() / s.numGpuBlocks() : Double.NaN;
    if (nanoClock.getAsLong() - s.atNanos() > maxAgeNanos) {
      return new WorkerLoad(l.prefillTokens(), l.decodeBlocks(), l.contextBlocks(), l.requests(), -1, localUsage,
          false);
    }
    long requests = Math.max(l.requests(), Math.round(s.running() + s.waiting()) + l.sinceRequests());
    long context = l.contextBlocks();
    if (requests > l.requests()) {
      double perRequest = l.requests() > 0 ? (double) l.contextBlocks() / l.requests() : ledger.meanContextBlocks();
      context = Math.max(context, Math.round(requests * perRequest));
    }
    long decode = l.decodeBlocks();
    if (s.numGpuBlocks() > 0 && !Double.isNaN(s.kvUsage())) {
      decode = Math.max(decode, Math.round(s.kvUsage() * s.numGpuBlocks()) + l.sinceDecodeBlocks());
    }
    long prefill = Math.max(l.prefillTokens(),
        l.sincePrefillTokens() + Math.round(s.waiting() * ledger.meanPrefillTokens()));
    double usage = s.kvUsage();
    if (!Double.isNaN(localUsage) && (Double.isNaN(usage) || localUsage > usage)) {
      usage = localUsage;
    }
    return new WorkerLoad(prefill, decode, context, requests, Math.round(s.waiting()), usage, true);
  }

  /** Leading blocks of the request already held by this router's in-flight requests on {@code worker}. */
  public int activePrefixBlocks(WorkerId worker, long[] blockHashes) {
    return ledger.activePrefixBlocks(worker, blockHashes);
  }
}
