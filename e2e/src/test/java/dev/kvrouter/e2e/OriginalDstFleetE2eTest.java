package dev.kvrouter.e2e;

class OriginalDstFleetE2eTest extends FleetAndFailureContract {
  @Override
  String envoyConfig() {
    return "envoy-original-dst.yaml";
  }
}
