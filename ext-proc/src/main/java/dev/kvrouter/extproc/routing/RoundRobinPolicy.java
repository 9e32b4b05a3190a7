package dev.kvrouter.extproc.routing;

import dev.kvrouter.xds.registry.Worker;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/** Each request to the next eligible worker. The baseline every other policy is measured against. */
public final class RoundRobinPolicy implements RoutingPolicy {

  private final AtomicLong next = new AtomicLong();

  @Override
  public String name() {
    return "round_robin";
  }

  @Override
  public Choice choose(RouteRequest request, List<Worker> eligible) {
    int i = (int) Math.floorMod(next.getAndIncrement(), (long) eligible.size());
    return new Choice(eligible.get(i), "round_robin");
  }
}
