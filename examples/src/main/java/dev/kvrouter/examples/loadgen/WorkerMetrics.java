package dev.kvrouter.examples.loadgen;

import dev.kvrouter.examples.report.WorkerCounters;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Reads workers' {@code /metrics}: the engine counters before and after a run, and the queue gauges sampled
 * during it. Accepts the current vLLM names and the older {@code vllm:gpu_prefix_cache_*} ones. Thread-safe
 * (stateless over a shared {@link HttpClient}).
 */
public final class WorkerMetrics {

  static final String RUNNING = "vllm:num_requests_running";
  static final String WAITING = "vllm:num_requests_waiting";

  private final HttpClient http;
  private final Duration timeout;

  public WorkerMetrics(HttpClient http, Duration timeout) {
    this.http = http;
    this.timeout = timeout;
  }

  /** The summed samples of one worker's {@code /metrics}; fails on a non-200 answer. */
  public CompletableFuture<Map<String, Double>> scrape(WorkerTarget w) {
    HttpRequest req = HttpRequest.newBuilder(w.metricsUri()).timeout(timeout).GET().build();
    return http.sendAsync(req, HttpResponse.BodyHandlers.ofString()).thenApply(r -> {
      if (r.statusCode() != 200) {
        throw new IllegalStateException(w.name() + " /metrics answered " + r.statusCode());
      }
      return PrometheusText.sums(r.body());
    });
  }

  /**
   * Counters of every worker, scraped in parallel. A worker that cannot be read gets
   * {@link WorkerCounters#ABSENT} and a line in {@code notes}.
   */
  public Map<String, WorkerCounters> counters(List<WorkerTarget> workers, List<String> notes) {
    Map<String, CompletableFuture<Map<String, Double>>> pending = new LinkedHashMap<>();
    for (WorkerTarget w : workers) {
      pending.put(w.name(), scrape(w));
    }
    Map<String, WorkerCounters> out = new LinkedHashMap<>();
    for (Map.Entry<String, CompletableFuture<Map<String, Double>>> e : pending.entrySet()) {
      try {
        out.put(e.getKey(), counters(e.getValue().get(timeout.toMillis() + 1000, TimeUnit.MILLISECONDS)));
      } catch (InterruptedException ie) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while scraping", ie);
      } catch (Exception ex) {
        notes.add("metrics of " + e.getKey() + " unreadable: " + rootMessage(ex));
        out.put(e.getKey(), WorkerCounters.ABSENT);
      }
    }
    return out;
  }

  /** The counters in one scrape. */
  public static WorkerCounters counters(Map<String, Double> s) {
    return new WorkerCounters(get(s, "vllm:prompt_tokens_total"),
        get(s, "vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        get(s, "vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        get(s, "vllm:generation_tokens_total"), get(s, "vllm:request_success_total"),
        get(s, "kvrouter_sim_prefill_tokens_computed_total"), get(s, "kvrouter_sim_prompt_tokens_cached_total"),
        get(s, "vllm:time_to_first_token_seconds_sum"), get(s, "vllm:time_to_first_token_seconds_count"),
        get(s, "kvrouter_sim_first_token_late_seconds_total"), get(s, "kvrouter_sim_http_first_chunk_seconds_total"),
        get(s, "kvrouter_sim_http_first_chunks_total"));
  }

  /**
   * Waits until every readable worker reports no running or waiting request, or the timeout passes; returns
   * whether they all went idle. Polls every 100 ms.
   */
  public boolean awaitIdle(List<WorkerTarget> workers, Duration max) throws InterruptedException {
    long deadline = System.nanoTime() + max.toNanos();
    while (true) {
      boolean idle = true;
      for (WorkerTarget w : workers) {
        try {
          Map<String, Double> s = scrape(w).get(timeout.toMillis() + 1000, TimeUnit.MILLISECONDS);
          idle &= s.getOrDefault(RUNNING, 0.0) + s.getOrDefault(WAITING, 0.0) == 0;
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
          // unreadable workers do not hold the run back
        }
      }
      if (idle) {
        return true;
      }
      if (System.nanoTime() >= deadline) {
        return false;
      }
      Thread.sleep(100);
    }
  }

  private static double get(Map<String, Double> s, String... names) {
    for (String n : names) {
      Double v = s.get(n);
      if (v != null) {
        return v;
      }
    }
    return Double.NaN;
  }

  static String rootMessage(Throwable t) {
    Throwable c = t;
    while (c.getCause() != null && c.getCause() != c) {
      c = c.getCause();
    }
    return c.getClass().getSimpleName() + (c.getMessage() == null ? "" : ": " + c.getMessage());
  }
}
