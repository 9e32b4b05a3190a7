package dev.kvrouter.extproc.routing;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The policies a configuration or an {@code x-kvrouter-policy} header can name. */
public final class StandardPolicies {

  /** Every name, the default first. */
  public static final List<String> NAMES = List.of(KvAwarePolicy.NAME, RoundRobinPolicy.NAME,
      LeastLoadPolicy.NAME, CacheOnlyPolicy.NAME, RandomPolicy.NAME, DynamoPolicy.NAME, LlmdPolicy.NAME);

  private StandardPolicies() {}

  /** A fresh instance of each (round robin keeps a counter). */
  public static Map<String, RoutingPolicy> create() {
    Map<String, RoutingPolicy> m = new LinkedHashMap<>();
    for (RoutingPolicy p : List.of(new KvAwarePolicy(), new RoundRobinPolicy(), new LeastLoadPolicy(),
        new CacheOnlyPolicy(), new RandomPolicy(), new DynamoPolicy(), new LlmdPolicy())) {
      m.put(p.name(), p);
    }
    return m;
  }
}
