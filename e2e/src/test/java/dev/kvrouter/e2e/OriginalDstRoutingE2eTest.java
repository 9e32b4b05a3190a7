package dev.kvrouter.e2e;

/** envoy-config/envoy-original-dst.yaml: ORIGINAL_DST, FULL_DUPLEX_STREAMED bodies, delta ADS. */
class OriginalDstRoutingE2eTest extends RoutingContract {
  @Override
  String envoyConfig() {
    return "envoy-original-dst.yaml";
  }
}
