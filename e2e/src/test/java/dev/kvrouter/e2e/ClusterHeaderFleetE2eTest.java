package dev.kvrouter.e2e;

class ClusterHeaderFleetE2eTest extends FleetAndFailureContract {
  @Override
  String envoyConfig() {
    return "envoy.yaml";
  }
}
