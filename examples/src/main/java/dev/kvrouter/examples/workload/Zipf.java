package dev.kvrouter.examples.workload;

import java.util.Arrays;

/** Zipf-distributed ranks in {@code [0, n)}: P(k) proportional to {@code 1 / (k + 1)^s}. Immutable. */
final class Zipf {

  private final double[] cdf;

  Zipf(int n, double s) {
    if (n <= 0 || s < 0) {
      throw new IllegalArgumentException("zipf needs n > 0 and s >= 0, was n=" + n + " s=" + s);
    }
    cdf = new double[n];
    double sum = 0;
    for (int k = 0; k < n; k++) {
      sum += 1.0 / Math.pow(k + 1, s);
      cdf[k] = sum;
    }
    for (int k = 0; k < n; k++) {
      cdf[k] /= sum;
    }
  }

  int sample(Rng rng) {
    double u = rng.nextDouble();
    int i = Arrays.binarySearch(cdf, u);
    int k = i >= 0 ? i : -i - 1;
    return Math.min(k, cdf.length - 1);
  }
}
