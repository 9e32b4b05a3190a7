package dev.kvrouter.examples.report;

/**
 * The router's own resource use at one instant, taken before and after a run (and sampled during it for the
 * peak heap). Fields the source cannot know are -1.
 *
 * @param cpuTimeNanos cumulative CPU time of the router (process or its threads)
 * @param heapUsedBytes Java heap in use
 * @param rssBytes resident set size of the router process
 * @param jitCpuTimeNanos the part of {@code cpuTimeNanos} spent by the JVM's JIT compiler threads: a fresh router
 *     compiles its hot paths during the first measured run, which would otherwise charge that run's policy
 */
public record RouterSnapshot(long cpuTimeNanos, long heapUsedBytes, long rssBytes, long jitCpuTimeNanos) {

  /** A snapshot whose source cannot tell JIT compilation apart. */
  public RouterSnapshot(long cpuTimeNanos, long heapUsedBytes, long rssBytes) {
    this(cpuTimeNanos, heapUsedBytes, rssBytes, -1);
  }
}
