package dev.kvrouter.dist;

import dev.kvrouter.extproc.routing.RoutingPolicy;
import dev.kvrouter.extproc.routing.StandardPolicies;
import java.util.List;
import java.util.Map;

/** The routing policies a configuration or an {@code x-kvrouter-policy} header can name. */
final class Policies {

  static final List<String> NAMES = StandardPolicies.NAMES;

  private Policies() {}

  static Map<String, RoutingPolicy> create() {
    return StandardPolicies.create();
  }
}
