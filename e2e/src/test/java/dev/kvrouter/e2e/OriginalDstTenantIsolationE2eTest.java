package dev.kvrouter.e2e;

/** envoy-config/envoy-original-dst.yaml (FULL_DUPLEX_STREAMED bodies: the rewrite is re-streamed). */
class OriginalDstTenantIsolationE2eTest extends TenantIsolationContract {
  @Override
  String envoyConfig() {
    return "envoy-original-dst.yaml";
  }
}
