package dev.kvrouter.examples.loadgen;

import dev.kvrouter.examples.workload.Workload;

/**
 * Gets the stack ready for one policy's run and returns that run's context. The A/B runner calls it before
 * every run, after resetting the workers' prefix caches. This is where a runner restarts the router with the
 * policy (when the stack cannot switch per request), adds router probes to the context, or checks health.
 */
@FunctionalInterface
public interface PolicyPreparer {

  RunContext prepare(String policy, Workload workload, RunContext.Builder context) throws Exception;

  /** Nothing to prepare: the policy travels in the request header. */
  static PolicyPreparer none() {
    return (policy, workload, context) -> context.build();
  }
}
