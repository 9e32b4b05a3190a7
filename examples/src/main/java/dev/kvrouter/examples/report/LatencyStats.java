package dev.kvrouter.examples.report;

import org.HdrHistogram.Histogram;

/** A latency distribution in milliseconds. All zero (with count 0) when nothing was measured. */
public record LatencyStats(long count, double mean, double p50, double p90, double p95, double p99, double max) {

  public static final LatencyStats EMPTY = new LatencyStats(0, 0, 0, 0, 0, 0, 0);

  /** From a histogram of microseconds. */
  public static LatencyStats ofMicros(Histogram h) {
    if (h == null || h.getTotalCount() == 0) {
      return EMPTY;
    }
    return new LatencyStats(h.getTotalCount(), ms(h.getMean()), ms(h.getValueAtPercentile(50)),
        ms(h.getValueAtPercentile(90)), ms(h.getValueAtPercentile(95)), ms(h.getValueAtPercentile(99)),
        ms(h.getMaxValue()));
  }

  /** A histogram for microsecond latencies up to an hour, 3 significant digits. */
  public static Histogram newMicrosHistogram() {
    return new Histogram(3_600_000_000L, 3);
  }

  private static double ms(double micros) {
    return Math.round(micros) / 1000.0;
  }
}
