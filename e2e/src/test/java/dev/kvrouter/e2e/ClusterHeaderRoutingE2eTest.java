package dev.kvrouter.e2e;

/** envoy-config/envoy.yaml: cluster-header routing, BUFFERED request bodies, state-of-the-world ADS. */
class ClusterHeaderRoutingE2eTest extends RoutingContract {
  @Override
  String envoyConfig() {
    return "envoy.yaml";
  }
}
