package dev.kvrouter.examples.sim.timing;

/** How long one engine step takes on the simulated hardware. Pure and thread-safe. */
@FunctionalInterface
public interface TimingModel {

  /** Duration of a step doing {@code work}, in nanoseconds; 0 for an empty step. */
  long stepNanos(StepWork work);
}
