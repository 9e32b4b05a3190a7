package dev.kvrouter.examples.sim.engine;

import dev.kvrouter.examples.sim.timing.StepWork;

/** What one call of {@link EngineCore#schedule()} decided: which requests compute how many tokens. */
public final class ScheduledStep {

  final EngineRequest[] requests;
  final int[] newTokens;
  final int size;
  final int preempted;
  private final StepWork work;

  ScheduledStep(EngineRequest[] requests, int[] newTokens, int size, int preempted, StepWork work) {
    this.requests = requests;
    this.newTokens = newTokens;
    this.size = size;
    this.preempted = preempted;
    this.work = work;
  }

  public int size() {
    return size;
  }

  public boolean isEmpty() {
    return size == 0;
  }

  /** Requests preempted while scheduling this step. */
  public int preempted() {
    return preempted;
  }

  public StepWork work() {
    return work;
  }

  /** Tokens scheduled for the {@code i}-th request of the step. */
  public int newTokens(int i) {
    return newTokens[i];
  }

  /** Id of the {@code i}-th request of the step. */
  public String requestId(int i) {
    return requests[i].id;
  }

  /** Total tokens scheduled. */
  public long totalTokens() {
    return work.newTokens();
  }
}
