package dev.kvrouter.dist;

import dev.kvrouter.extproc.routing.RoundRobinPolicy;
import dev.kvrouter.extproc.routing.RoutingPolicy;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/** The routing policies a configuration or an {@code x-kvrouter-policy} header can name. */
final class Policies {

  static final Set<String> NAMES = Set.of("round_robin");

  private Policies() {}

  static Map<String, RoutingPolicy> create() {
    Map<String, RoutingPolicy> m = new LinkedHashMap<>();
    RoutingPolicy rr = new RoundRobinPolicy();
    m.put(rr.name(), rr);
    return m;
  }
}
