package dev.kvrouter.examples.report;

import dev.kvrouter.examples.workload.IdealReuse;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.HdrHistogram.Histogram;

/**
 * The figures of one run (one workload, one policy), as they appear in the JSON report. Latencies in
 * milliseconds; shares in [0, 1]; optional figures are null when their source was absent.
 *
 * @param policy policy label
 * @param counts how many requests were planned, sent, completed and failed
 * @param errors failures by kind (see {@link RequestRecord#error})
 * @param durationSeconds from the first send to the last response end
 * @param throughput completed work per second of {@code durationSeconds}
 * @param ttftMs time to first content chunk, successful requests
 * @param itlMs gaps between content chunks
 * @param tpotMs per request, (e2e - ttft) / (completion tokens - 1)
 * @param e2eMs send to end of response
 * @param sendLagMs how late each send was against its planned arrival (the driver's own fidelity)
 * @param cache prompt tokens computed versus served from cache, beside the workload's ideal reuse
 * @param balance per-worker requests and prefill, and their imbalance
 * @param router the router's CPU, memory and decision time, or null if no probe was wired
 * @param ttftCdf TTFT distribution as [ms, cumulative fraction] points
 * @param load per-worker queue over time
 * @param notes caveats of this run
 * @param sessions closed-loop conversations (turns held for the previous answer, answers resent short), or null for
 *     an open-loop run
 * @param engineTtft TTFT as the engines measured it, or null when no worker exported its histogram
 */
public record PolicyResult(String policy, Counts counts, Map<String, Long> errors, double durationSeconds,
    Throughput throughput, LatencyStats ttftMs, LatencyStats itlMs, LatencyStats tpotMs, LatencyStats e2eMs,
    LatencyStats sendLagMs, Cache cache, Balance balance, RouterCost router, List<double[]> ttftCdf,
    LoadTimeline load, List<String> notes, Sessions sessions, EngineTtft engineTtft) {

  /**
   * The engines' own TTFT over the run, from each worker's {@code vllm:time_to_first_token_seconds} histogram
   * (the change of its {@code _sum} and {@code _count}): from the request's arrival at the engine to its first
   * token, so without the proxy, the router, the HTTP hops and the client. Only the mean is exact (the buckets are
   * too coarse for quantiles at these latencies); beside the client's mean it splits a through-Envoy TTFT into the
   * engines' share and everything in front of them.
   *
   * @param requests first tokens the engines counted
   * @param meanMs their mean TTFT
   * @param frontMs the client's mean TTFT minus {@code meanMs}
   * @param simLateMs of {@code frontMs}, the simulated engines' own lateness: how long after the modelled step end
   *     their thread got to apply a first token on a loaded host, in mean (null for engines that do not say)
   * @param simServerMs the simulated workers' HTTP servers' own mean TTFT of streamed responses (request taken to
   *     first token chunk flushed), or null: between it and the client's is only the proxy, the router and the
   *     client
   */
  public record EngineTtft(long requests, double meanMs, double frontMs, Double simLateMs, Double simServerMs) {}

  /** Request counts. {@code failed} includes {@code overflow} and {@code notSent}. */
  public record Counts(int planned, int sent, int completed, int failed, int overflow, int notSent, int maxInFlight) {}

  public record Throughput(double requestsPerSecond, double outputTokensPerSecond, double promptTokensPerSecond) {}

  /**
   * @param source where {@code promptTokens}/{@code cachedTokens}/{@code computedTokens} come from:
   *     {@code sim} (the simulator's truth counters), {@code vllm} (vLLM counters) or {@code usage} (summed
   *     {@code usage} of the responses, when no worker was scraped)
   * @param servedShare cachedTokens / promptTokens
   * @param idealShare the workload's ideal reuse (token share) at the run's block size
   * @param servedVsIdeal servedShare / idealShare
   * @param hitRate vLLM's prefix cache hit rate, hits / queries (queries count retries, so it can differ from
   *     servedShare)
   * @param usageServedShare sum(cached_tokens) / sum(prompt_tokens) over the responses that reported both
   */
  public record Cache(String source, long promptTokens, long cachedTokens, long computedTokens, double servedShare,
      double idealShare, Double servedVsIdeal, Double prefixCacheQueries, Double prefixCacheHits, Double hitRate,
      long usagePromptTokens, long usageCachedTokens, Double usageServedShare, int usageResponses) {}

  /**
   * @param requests per worker, from {@code x-kvrouter-served-by} (requests whose worker is unknown are not
   *     counted)
   * @param computedPrefillTokens per worker, from its counters, or null when not scraped
   * @param requestImbalance max over mean of {@code requests}
   * @param prefillImbalance max over mean of {@code computedPrefillTokens}
   * @param meanLoadImbalance time average, over samples with any load, of max over mean of running + waiting
   *     (over the workers whose scrape answered in that sample)
   * @param computedTokens per worker, tokens its engine computed: prefill it did not serve from cache plus the
   *     tokens it generated (the GPU work it was given), or null when not scraped
   * @param workImbalance max over mean of {@code computedTokens}. Beside {@code requestImbalance}, not instead:
   *     a cache-aware router sends more requests to the holder of a popular prefix, each of them cheaper, so
   *     requests can be uneven while the work is even (and the reverse)
   */
  public record Balance(List<String> workers, Map<String, Long> requests, Map<String, Long> computedPrefillTokens,
      double requestImbalance, Double prefillImbalance, Double meanLoadImbalance, Map<String, Long> computedTokens,
      Double workImbalance) {}

  /**
   * @param cpuSeconds router CPU time over the run
   * @param cpuMicrosPerRequest cpuSeconds per sent request
   * @param jitCpuSeconds the part of cpuSeconds spent compiling (the JVM's JIT threads), null when unknown
   * @param cpuMicrosPerRequestWithoutJit (cpuSeconds - jitCpuSeconds) per sent request: what routing costs once the
   *     router is warm, comparable across the policies of one A/B whichever ran first
   */
  public record RouterCost(Double cpuSeconds, Double cpuMicrosPerRequest, Double jitCpuSeconds,
      Double cpuMicrosPerRequestWithoutJit, Long heapUsedBeforeBytes, Long heapUsedAfterBytes, Long peakHeapBytes,
      Long rssAfterBytes, RoutingOverhead decisions) {}

  /** Per worker, [seconds from start, running, waiting] points (downsampled to at most 1,000 per worker). */
  public record LoadTimeline(double intervalSeconds, Map<String, List<double[]>> series) {}

  private static final int MAX_TIMELINE_POINTS = 1000;

  /** Summarizes a run; {@code ideal} is the workload's ideal reuse at the block size of the workers. */
  public static PolicyResult summarize(RunData run, IdealReuse ideal) {
    Histogram ttft = LatencyStats.newMicrosHistogram();
    Histogram e2e = LatencyStats.newMicrosHistogram();
    Histogram tpot = LatencyStats.newMicrosHistogram();
    Histogram lag = LatencyStats.newMicrosHistogram();
    Map<String, Long> errors = new TreeMap<>();
    Map<String, Long> perWorker = new LinkedHashMap<>();
    run.workers().forEach(w -> perWorker.put(w, 0L));
    int sent = 0;
    int completed = 0;
    int overflow = 0;
    int notSent = 0;
    long outputTokens = 0;
    long usagePrompt = 0;
    long usageCached = 0;
    int usageResponses = 0;
    for (RequestRecord r : run.requests()) {
      if (r.sentMicros() >= 0) {
        sent++;
        lag.recordValue(Math.max(0, r.sentMicros() - r.scheduledMicros()));
      }
      if (r.servedBy() != null) {
        perWorker.merge(r.servedBy(), 1L, Long::sum);
      }
      if (!r.ok()) {
        errors.merge(r.error(), 1L, Long::sum);
        overflow += "overflow".equals(r.error()) ? 1 : 0;
        notSent += "not_sent".equals(r.error()) ? 1 : 0;
        continue;
      }
      completed++;
      if (r.ttftMicros() >= 0) {
        ttft.recordValue(r.ttftMicros());
      }
      if (r.e2eMicros() >= 0) {
        e2e.recordValue(r.e2eMicros());
      }
      if (r.completionTokens() > 1 && r.ttftMicros() >= 0 && r.e2eMicros() >= r.ttftMicros()) {
        tpot.recordValue((r.e2eMicros() - r.ttftMicros()) / (r.completionTokens() - 1));
      }
      outputTokens += Math.max(0, r.completionTokens());
      if (r.promptTokens() >= 0 && r.cachedTokens() >= 0) {
        usagePrompt += r.promptTokens();
        usageCached += r.cachedTokens();
        usageResponses++;
      }
    }
    double seconds = run.durationMicros() / 1e6;
    Cache cache = cache(run, ideal, usagePrompt, usageCached, usageResponses);
    Throughput tp = new Throughput(per(completed, seconds), per(outputTokens, seconds),
        per(cache.promptTokens(), seconds));
    Counts counts = new Counts(run.requests().size(), sent, completed, run.requests().size() - completed, overflow,
        notSent, run.maxInFlight());
    LatencyStats ttftMs = LatencyStats.ofMicros(ttft);
    return new PolicyResult(run.policy(), counts, errors, round3(seconds), tp, ttftMs,
        LatencyStats.ofMicros(run.itlMicros()), LatencyStats.ofMicros(tpot), LatencyStats.ofMicros(e2e),
        LatencyStats.ofMicros(lag), cache, balance(run, perWorker), routerCost(run, sent), cdf(ttft),
        timeline(run), run.notes(), run.sessions(), engineTtft(run, ttftMs));
  }

  private static EngineTtft engineTtft(RunData run, LatencyStats client) {
    double sum = 0;
    double count = 0;
    double late = 0;
    boolean lateKnown = true;
    double server = 0;
    double serverCount = 0;
    for (WorkerCounters c : run.counters().values()) {
      if (!Double.isNaN(c.ttftSecondsSum()) && !Double.isNaN(c.ttftCount())) {
        sum += c.ttftSecondsSum();
        count += c.ttftCount();
        lateKnown &= !Double.isNaN(c.simFirstTokenLateSeconds());
        late += Double.isNaN(c.simFirstTokenLateSeconds()) ? 0 : c.simFirstTokenLateSeconds();
      }
      if (!Double.isNaN(c.simHttpFirstChunkSeconds()) && !Double.isNaN(c.simHttpFirstChunks())) {
        server += c.simHttpFirstChunkSeconds();
        serverCount += c.simHttpFirstChunks();
      }
    }
    if (count <= 0) {
      return null;
    }
    double mean = sum / count * 1000;
    return new EngineTtft(Math.round(count), round3(mean), round3(client.mean() - mean),
        lateKnown ? round3(late / count * 1000) : null, serverCount > 0 ? round3(server / serverCount * 1000) : null);
  }

  private static Cache cache(RunData run, IdealReuse ideal, long usagePrompt, long usageCached, int usageResponses) {
    double prompt = 0;
    double cached = 0;
    double computed = 0;
    double queries = 0;
    double hits = 0;
    boolean vllm = false;
    boolean sim = !run.counters().isEmpty();
    boolean anyQueries = false;
    for (WorkerCounters c : run.counters().values()) {
      if (!Double.isNaN(c.promptTokens())) {
        vllm = true;
        prompt += c.promptTokens();
        cached += nz(c.cachedPromptTokens());
        computed += nz(c.computedPrefillTokens());
      }
      sim &= !Double.isNaN(c.simPrefillComputed());
      if (!Double.isNaN(c.prefixCacheQueries())) {
        anyQueries = true;
        queries += c.prefixCacheQueries();
        hits += nz(c.prefixCacheHits());
      }
    }
    String source = vllm ? (sim ? "sim" : "vllm") : "usage";
    if (!vllm) {
      prompt = usagePrompt;
      cached = usageCached;
      computed = usagePrompt - usageCached;
    }
    double served = prompt > 0 ? cached / prompt : 0;
    double idealShare = ideal == null ? 0 : ideal.tokenShare();
    return new Cache(source, Math.round(prompt), Math.round(cached), Math.round(computed), round4(served),
        round4(idealShare), idealShare > 0 ? round4(served / idealShare) : null, anyQueries ? queries : null,
        anyQueries ? hits : null, anyQueries && queries > 0 ? round4(hits / queries) : null, usagePrompt, usageCached,
        usagePrompt > 0 ? round4(usageCached / (double) usagePrompt) : null, usageResponses);
  }

  private static Balance balance(RunData run, Map<String, Long> perWorker) {
    Map<String, Long> prefill = null;
    Map<String, Long> work = null;
    if (!run.counters().isEmpty()) {
      prefill = new LinkedHashMap<>();
      work = new LinkedHashMap<>();
      for (String w : run.workers()) {
        WorkerCounters c = run.counters().get(w);
        double v = c == null ? Double.NaN : c.computedPrefillTokens();
        if (!Double.isNaN(v)) {
          prefill.put(w, Math.round(v));
          if (!Double.isNaN(c.generationTokens())) {
            work.put(w, Math.round(v + c.generationTokens()));
          }
        }
      }
      if (prefill.isEmpty()) {
        prefill = null;
      }
      if (work.isEmpty()) {
        work = null;
      }
    }
    return new Balance(run.workers(), perWorker, prefill, round3(imbalance(perWorker.values())),
        prefill == null ? null : round3(imbalance(prefill.values())), meanLoadImbalance(run), work,
        work == null ? null : round3(imbalance(work.values())));
  }

  /** Max over mean; 1 when perfectly even or when there is nothing to balance. */
  public static double imbalance(java.util.Collection<? extends Number> values) {
    double sum = 0;
    double max = 0;
    for (Number n : values) {
      sum += n.doubleValue();
      max = Math.max(max, n.doubleValue());
    }
    return values.isEmpty() || sum <= 0 ? 1 : max / (sum / values.size());
  }

  private static Double meanLoadImbalance(RunData run) {
    if (run.load().isEmpty()) {
      return null;
    }
    // a tick's samples share its timestamp. A worker missing from one (its scrape skipped while the previous was
    // outstanding, or failed) has an unknown load, not none: it is left out, and a tick needs two workers to say
    // anything about balance
    Map<Long, Map<String, Double>> ticks = new TreeMap<>();
    for (LoadSample s : run.load()) {
      ticks.computeIfAbsent(s.atMicros(), k -> new LinkedHashMap<>()).put(s.worker(), s.running() + s.waiting());
    }
    int needed = Math.min(2, run.workers().size());
    double sum = 0;
    int n = 0;
    for (Map<String, Double> tick : ticks.values()) {
      List<Double> v = new ArrayList<>();
      for (String w : run.workers()) {
        Double load = tick.get(w);
        if (load != null) {
          v.add(load);
        }
      }
      double total = v.stream().mapToDouble(Double::doubleValue).sum();
      if (v.size() >= needed && total > 0) {
        sum += imbalance(v);
        n++;
      }
    }
    return n == 0 ? null : round3(sum / n);
  }

  private static RouterCost routerCost(RunData run, int sent) {
    RouterSnapshot b = run.routerBefore();
    RouterSnapshot a = run.routerAfter();
    if (b == null && a == null && run.overhead() == null) {
      return null;
    }
    Double cpu = b != null && a != null && b.cpuTimeNanos() >= 0 && a.cpuTimeNanos() >= 0
        ? round3((a.cpuTimeNanos() - b.cpuTimeNanos()) / 1e9) : null;
    Double jit = cpu != null && b.jitCpuTimeNanos() >= 0 && a.jitCpuTimeNanos() >= 0
        ? round3((a.jitCpuTimeNanos() - b.jitCpuTimeNanos()) / 1e9) : null;
    return new RouterCost(cpu, cpu == null || sent == 0 ? null : round3(cpu * 1e6 / sent), jit,
        jit == null || sent == 0 ? null : round3((cpu - jit) * 1e6 / sent),
        b == null || b.heapUsedBytes() < 0 ? null : b.heapUsedBytes(),
        a == null || a.heapUsedBytes() < 0 ? null : a.heapUsedBytes(),
        run.routerPeakHeapBytes() < 0 ? null : run.routerPeakHeapBytes(),
        a == null || a.rssBytes() < 0 ? null : a.rssBytes(), run.overhead());
  }

  private static List<double[]> cdf(Histogram ttft) {
    List<double[]> points = new ArrayList<>();
    if (ttft.getTotalCount() == 0) {
      return points;
    }
    points.add(new double[] {ttft.getMinValue() / 1000.0, 0});
    for (int p = 1; p <= 100; p++) {
      points.add(new double[] {ttft.getValueAtPercentile(p) / 1000.0, p / 100.0});
      if (p == 99) {
        points.add(new double[] {ttft.getValueAtPercentile(99.5) / 1000.0, 0.995});
        points.add(new double[] {ttft.getValueAtPercentile(99.9) / 1000.0, 0.999});
      }
    }
    return points;
  }

  private static LoadTimeline timeline(RunData run) {
    Map<String, List<double[]>> series = new LinkedHashMap<>();
    run.workers().forEach(w -> series.put(w, new ArrayList<>()));
    for (LoadSample s : run.load()) {
      series.computeIfAbsent(s.worker(), k -> new ArrayList<>())
          .add(new double[] {round3(s.atMicros() / 1e6), s.running(), s.waiting()});
    }
    for (Map.Entry<String, List<double[]>> e : series.entrySet()) {
      List<double[]> pts = e.getValue();
      if (pts.size() > MAX_TIMELINE_POINTS) {
        int stride = (pts.size() + MAX_TIMELINE_POINTS - 1) / MAX_TIMELINE_POINTS;
        List<double[]> kept = new ArrayList<>();
        for (int i = 0; i < pts.size(); i += stride) {
          kept.add(pts.get(i));
        }
        e.setValue(kept);
      }
    }
    return new LoadTimeline(run.loadIntervalMicros() / 1e6, series);
  }

  private static double per(double v, double seconds) {
    return seconds > 0 ? round3(v / seconds) : 0;
  }

  private static double nz(double v) {
    return Double.isNaN(v) ? 0 : v;
  }

  static double round3(double v) {
    return Math.round(v * 1000.0) / 1000.0;
  }

  static double round4(double v) {
    return Math.round(v * 10000.0) / 10000.0;
  }
}
