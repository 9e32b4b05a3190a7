package dev.kvrouter.examples.report;

import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.HdrHistogram.Histogram;

/**
 * Everything measured in one run of one workload under one policy, before summarizing. Produced by the HTTP
 * driver ({@code dev.kvrouter.examples.loadgen.LoadGenerator}) or by a virtual-time replay; summarized by
 * {@link PolicyResult#summarize}.
 *
 * @param policy the policy label
 * @param workers every worker of the fleet (workers that served nothing count in the balance)
 * @param requests one record per planned request, in workload order
 * @param itlMicros every inter-token gap of the run (between content chunks), or null if not measured
 * @param durationMicros from the first send to the last response end (or the run's end)
 * @param counters per worker, the change of its engine counters over the run; empty when not scraped
 * @param load per-worker queue samples, in time order
 * @param loadIntervalMicros the sampling interval of {@code load}
 * @param routerBefore the router before the run, or null
 * @param routerAfter the router after the run, or null
 * @param routerPeakHeapBytes the largest heap sampled during the run, or -1
 * @param overhead the router's decision timings for this run, or null
 * @param maxInFlight the most requests in flight at once
 * @param notes anything the reader should know (scrape failures, caps hit)
 * @param sessions closed-loop conversations (holds, answers resent), or null for an open-loop run or a driver that
 *     does not count them
 */
public record RunData(String policy, List<String> workers, List<RequestRecord> requests, Histogram itlMicros,
    long durationMicros, Map<String, WorkerCounters> counters, List<LoadSample> load, long loadIntervalMicros,
    RouterSnapshot routerBefore, RouterSnapshot routerAfter, long routerPeakHeapBytes, RoutingOverhead overhead,
    int maxInFlight, List<String> notes, Sessions sessions) {

  public RunData {
    Objects.requireNonNull(policy, "policy");
    workers = List.copyOf(workers);
    requests = List.copyOf(requests);
    counters = Map.copyOf(counters);
    load = List.copyOf(load);
    notes = List.copyOf(notes);
  }
}
