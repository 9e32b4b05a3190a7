package dev.kvrouter.extproc.routing;

import java.util.concurrent.atomic.AtomicLong;

/** Each request to the next eligible worker. The baseline every other policy is measured against. */
public final class RoundRobinPolicy implements RoutingPolicy {

  public static final String NAME = "round_robin";

  private final AtomicLong next = new AtomicLong();

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public Choice choose(Scoring s) {
    int i = (int) Math.floorMod(next.getAndIncrement(), (long) s.candidates().size());
    return new Choice(s.candidates().get(i), "round_robin");
  }
}
