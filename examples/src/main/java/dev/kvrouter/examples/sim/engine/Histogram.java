package dev.kvrouter.examples.sim.engine;

import java.util.Arrays;

/**
 * A Prometheus-style histogram with fixed upper bounds (cumulative counts are derived when rendering).
 * Single writer; readers take a {@link #snapshot()} on the writer's thread.
 */
public final class Histogram {

  /** vLLM's {@code vllm:time_to_first_token_seconds} buckets. */
  public static final double[] TTFT_BUCKETS = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
      1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
  /** vLLM's {@code vllm:e2e_request_latency_seconds} buckets. */
  public static final double[] E2E_BUCKETS = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
      40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
  /** vLLM's {@code vllm:inter_token_latency_seconds} buckets. */
  public static final double[] ITL_BUCKETS = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
      2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};

  private final double[] bounds;
  private final long[] counts;
  private long count;
  private double sum;

  public Histogram(double[] bounds) {
    this.bounds = bounds.clone();
    this.counts = new long[bounds.length + 1];
  }

  private Histogram(double[] bounds, long[] counts, long count, double sum) {
    this.bounds = bounds;
    this.counts = counts;
    this.count = count;
    this.sum = sum;
  }

  public void observe(double v) {
    int i = Arrays.binarySearch(bounds, v);
    counts[i >= 0 ? i : -i - 1]++;
    count++;
    sum += v;
  }

  public Histogram snapshot() {
    return new Histogram(bounds, counts.clone(), count, sum);
  }

  public double[] bounds() {
    return bounds.clone();
  }

  /** Non-cumulative count of bucket {@code i}; index {@code bounds.length} is the +Inf bucket. */
  public long bucket(int i) {
    return counts[i];
  }

  public long count() {
    return count;
  }

  public double sum() {
    return sum;
  }
}
