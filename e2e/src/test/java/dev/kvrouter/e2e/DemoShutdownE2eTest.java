package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@code kvrouter demo --keep-running} as an operator runs it, in a JVM of its own, stopped the way a service
 * manager or {@code kill <pid>} stops it: SIGTERM to that JVM alone, not to its process group as Ctrl-C is.
 */
class DemoShutdownE2eTest {

  /** The demo's Envoy outlived a SIGTERM of the JVM that started it, holding the demo's ports. */
  @Test
  void aSigtermOfTheDemoStopsItsEnvoy() throws Exception {
    List<String> cmd = List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx256m", "-Dkvrouter.root=" + Stack.ROOT, "-cp", System.getProperty("java.class.path"),
        "dev.kvrouter.dist.Kvrouter", "demo", "--keep-running", "--no-ab", "--requests", "1");
    Process demo = new ProcessBuilder(cmd).directory(Stack.ROOT.toFile()).redirectErrorStream(true).start();
    ProcessHandle envoy = null;
    try {
      CompletableFuture<String> up = CompletableFuture.supplyAsync(() -> {
        StringBuilder seen = new StringBuilder();
        try (BufferedReader r = new BufferedReader(new InputStreamReader(demo.getInputStream(),
            StandardCharsets.UTF_8))) {
          for (String line = r.readLine(); line != null; line = r.readLine()) {
            seen.append(line).append('\n');
            if (line.contains("stack is up")) {
              return seen.toString();
            }
          }
        } catch (java.io.IOException e) {
          seen.append(e);
        }
        throw new AssertionError("the demo ended before its stack was up:\n" + seen);
      });
      up.get(90, TimeUnit.SECONDS);
      Optional<ProcessHandle> found = demo.descendants()
          .filter(h -> h.info().command().map(c -> c.endsWith("envoy") || c.contains("/envoy")).orElse(false))
          .findFirst();
      assertThat(found).as("the demo's Envoy among %s", demo.descendants()
          .map(h -> h.pid() + " " + h.info().command().orElse("?")).toList()).isPresent();
      envoy = found.get();

      demo.destroy(); // SIGTERM, to the JVM only
      assertThat(demo.waitFor(30, TimeUnit.SECONDS)).as("the demo JVM exited on SIGTERM").isTrue();
      ProcessHandle e = envoy;
      Await.until("Envoy (pid " + e.pid() + ") stopped with the demo", Duration.ofSeconds(5), () -> !e.isAlive());
    } finally {
      if (envoy != null && envoy.isAlive()) {
        envoy.destroyForcibly();
      }
      demo.destroyForcibly();
      demo.waitFor(10, TimeUnit.SECONDS);
    }
  }
}
