package dev.kvrouter.bench.overhead;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class EnvoyOverheadBenchTest {

  final Path config = Path.of(System.getProperty("kvrouter.root")).resolve("envoy-config/envoy.yaml");

  @Test
  void removesExactlyTheNamedFilterAndItsComments() throws Exception {
    String yaml = Files.readString(config);
    String noObserver = EnvoyOverheadBench.withoutFilter(yaml, "kvrouter.response_observer");
    assertThat(noObserver).doesNotContain("kvrouter.response_observer", "observability_mode",
        "Watches responses for the router").contains("envoy.filters.http.ext_proc", "envoy.filters.http.router");
    String direct = EnvoyOverheadBench.withoutFilter(noObserver, "envoy.filters.http.ext_proc");
    assertThat(direct).doesNotContain("filters.http.ext_proc.v3.ExternalProcessor").contains("envoy.filters.http.router",
        "early_header_mutation_extensions", "name: kvrouter_ext_proc");
    assertThat(direct.lines().count()).isLessThan(noObserver.lines().count());
  }

  @Test
  void anUnknownFilterIsAnError() throws Exception {
    assertThatThrownBy(() -> EnvoyOverheadBench.withoutFilter(Files.readString(config), "nope"))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
