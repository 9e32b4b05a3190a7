package dev.kvrouter.examples.envoy;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class EnvoyProcessTest {

  /**
   * Ports for servers bound later come from below the kernel's ephemeral range, where no outgoing connection can
   * take them meanwhile. The range's first port read as the kernel gives it (a plain stream; procfs reports size
   * 0, and the picker's first reading returned one byte on the CI kernel, so every port came from inside the range).
   */
  @Test
  void portsForLaterAreBelowTheKernelsEphemeralRange() throws Exception {
    Path range = Path.of("/proc/sys/net/ipv4/ip_local_port_range");
    int low = 32768;
    if (Files.isReadable(range)) {
      try (FileInputStream in = new FileInputStream(range.toFile())) {
        low = Integer.parseInt(new String(in.readAllBytes(), StandardCharsets.US_ASCII).trim().split("\\s+")[0]);
      }
    }
    assertThat(EnvoyProcess.ephemeralLow()).isEqualTo(low);
    for (int i = 0; i < 20; i++) {
      assertThat(EnvoyProcess.freeLoopbackPort()).isBetween(10_000, low - 1);
    }
  }
}
