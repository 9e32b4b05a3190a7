package dev.kvrouter.extproc.routing;

/** Baseline: uniformly at random among the eligible. */
public final class RandomPolicy implements RoutingPolicy {

  public static final String NAME = "random";

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public Choice choose(Scoring s) {
    return new Choice(Selection.uniform(s.candidates(), s.rng()), "random");
  }
}
