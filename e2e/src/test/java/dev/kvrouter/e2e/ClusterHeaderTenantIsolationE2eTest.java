package dev.kvrouter.e2e;

/** envoy-config/envoy.yaml (BUFFERED bodies: the rewrite is a body mutation with a new content-length). */
class ClusterHeaderTenantIsolationE2eTest extends TenantIsolationContract {
  @Override
  String envoyConfig() {
    return "envoy.yaml";
  }
}
