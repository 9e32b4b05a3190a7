package dev.kvrouter.extproc.routing;

/**
 * Time the request path spent before routing, for the decision record. Zero when a step did not run.
 *
 * @param parseNanos JSON body parsing
 * @param templateNanos chat template rendering
 * @param tokenizeNanos tokenization
 * @param hashNanos block hashing
 */
public record RequestTimings(long parseNanos, long templateNanos, long tokenizeNanos, long hashNanos) {

  public static final RequestTimings NONE = new RequestTimings(0, 0, 0, 0);
}
