package dev.kvrouter.examples.report;

/**
 * The router's own resource use at one instant, taken before and after a run (and sampled during it for the
 * peak heap). Fields the source cannot know are -1.
 *
 * @param cpuTimeNanos cumulative CPU time of the router (process or its threads)
 * @param heapUsedBytes Java heap in use
 * @param rssBytes resident set size of the router process
 */
public record RouterSnapshot(long cpuTimeNanos, long heapUsedBytes, long rssBytes) {}
