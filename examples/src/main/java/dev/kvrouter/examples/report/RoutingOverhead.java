package dev.kvrouter.examples.report;

/**
 * Time the router spent deciding, from its decision records ({@code timings_us.total}), for the requests of one
 * run.
 *
 * @param decisions decision records found
 * @param fallbacks decisions that fell back to plain load balancing
 */
public record RoutingOverhead(long decisions, double meanMicros, double p50Micros, double p99Micros,
    double maxMicros, long fallbacks) {}
