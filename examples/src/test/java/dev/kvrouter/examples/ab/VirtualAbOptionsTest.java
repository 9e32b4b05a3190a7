package dev.kvrouter.examples.ab;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import picocli.CommandLine;

class VirtualAbOptionsTest {

  private static boolean charts(String... args) {
    VirtualAb ab = new VirtualAb();
    new CommandLine(ab).parseArgs(args);
    return ab.charts;
  }

  @Test
  void noChartsTurnsChartsOff() {
    // picocli negates a negatable option's fallback value, not its default: without fallbackValue "true",
    // --no-charts set charts to true and every run wrote its charts anyway
    assertThat(charts("--workload", "unique")).isTrue();
    assertThat(charts("--workload", "unique", "--no-charts")).isFalse();
    assertThat(charts("--workload", "unique", "--charts=false")).isFalse();
    assertThat(charts("--workload", "unique", "--charts")).isTrue();
  }
}
