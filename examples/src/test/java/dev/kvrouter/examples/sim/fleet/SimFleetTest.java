package dev.kvrouter.examples.sim.fleet;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.index.wire.WireLayout;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkersFile;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** Many workers in one JVM, and the workers.yaml the router reads. */
@Timeout(120)
class SimFleetTest {

  private static FleetConfig config(int n) {
    return new FleetConfig(n, "sim-", "127.0.0.1", 0, true, 0, 0, "", WireLayout.VLLM_MAP,
        Presets.LLAMA_3_1_8B_H100, "m", List.of(), null, 16, 512, 64, 2048, 8192, 0, true, 1, null, 2);
  }

  @Test
  void workersAnswerOnTheirOwnPortsAndNameThemselves(@TempDir Path dir) throws Exception {
    HttpClient client = HttpClient.newHttpClient();
    try (SimFleet fleet = SimFleet.start(config(3))) {
      Set<String> servedBy = new HashSet<>();
      for (SimWorker w : fleet.workers()) {
        HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + w.httpPort()
            + "/v1/completions")).POST(HttpRequest.BodyPublishers.ofString(
                "{\"model\":\"m\",\"prompt\":[1,2,3],\"max_tokens\":2}")).build(),
            HttpResponse.BodyHandlers.ofString());
        assertThat(r.statusCode()).isEqualTo(200);
        servedBy.add(r.headers().firstValue("x-kvrouter-served-by").orElseThrow());
      }
      assertThat(servedBy).containsExactlyInAnyOrder("sim-0", "sim-1", "sim-2");

      Path file = dir.resolve("workers.yaml");
      fleet.writeWorkersFile(file);
      List<Worker> read = WorkersFile.read(file);
      assertThat(read).isEqualTo(fleet.registryEntries());
      Worker w1 = read.get(1);
      assertThat(w1.name()).isEqualTo("sim-1");
      assertThat(w1.port()).isEqualTo(fleet.workers().get(1).httpPort());
      assertThat(w1.blockSize()).isEqualTo(16);
      assertThat(w1.events().endpoint()).isEqualTo(fleet.workers().get(1).eventsEndpoint());
      assertThat(w1.events().replayEndpoint()).isEqualTo(fleet.workers().get(1).replayEndpoint());
      assertThat(w1.events().bind()).isFalse();
      assertThat(w1.labels()).containsEntry("preset", "llama3.1-8b-h100").containsEntry("simulated", "true");
    }
  }

  @Test
  void aFleetWithoutReplayNamesNoReplaySocket(@TempDir Path dir) throws Exception {
    FleetConfig noReplay = new FleetConfig(2, "sim-", "127.0.0.1", 0, true, 0, -1, "", WireLayout.VLLM_MAP,
        Presets.LLAMA_3_1_8B_H100, "m", List.of(), null, 16, 512, 64, 2048, 8192, 0, true, 1, null, 2);
    try (SimFleet fleet = SimFleet.start(noReplay)) {
      Path file = dir.resolve("workers.yaml");
      fleet.writeWorkersFile(file);
      for (Worker w : WorkersFile.read(file)) {
        assertThat(w.events().endpoint()).as(w.name() + " publishes").isNotNull();
        assertThat(w.events().replayEndpoint()).as(w.name() + " (vLLM without replay_endpoint)").isNull();
      }
      assertThat(fleet.workers()).allSatisfy(w -> assertThat(w.replayEndpoint()).isNull());
    }
  }

  @Test
  void workersYamlRoundTripsEveryField() {
    Worker full = new Worker("a.b-1", "10.0.0.5", 8000, "Qwen/Qwen3-8B", List.of("alice", "bob"),
        Worker.Role.PREFILL, new Worker.EventEndpoint("tcp://10.0.0.5:5557", "tcp://10.0.0.5:5558", "kv@a@m", true),
        2, 64, 3, "http://10.0.0.5:9000/metrics", true, Map.of("zone", "a"));
    Worker bare = Worker.simple("w2", "::1", 9, "m");
    assertThat(WorkersFile.parse(WorkersYaml.render(List.of(full, bare)), "test")).containsExactly(full, bare);
  }

  @Test
  void consecutivePortsFromTheBases() {
    FleetConfig c = new FleetConfig(4, "w", "127.0.0.1", 8100, true, 5600, 5700, "", null, Presets.DEFAULT, null,
        null, null, 16, 0, 256, 8192, 0, 0, true, 0, null, 1);
    assertThat(FleetConfig.port(c.httpBasePort(), 3)).isEqualTo(8103);
    assertThat(c.engineConfig(2).model()).isEqualTo(Presets.DEFAULT.model().name());
    assertThat(c.engineConfig(2).numGpuBlocks()).isEqualTo(Presets.DEFAULT.numGpuBlocks(16));
    assertThat(c.engineConfig(2).maxNumSeqs()).as("given").isEqualTo(256);
    FleetConfig a100 = new FleetConfig(2, "w", "127.0.0.1", 0, true, 0, 0, "", null,
        Presets.byId("llama3.1-8b-a100"), null, null, null, 16, 0, 0, 0, 0, 0, true, 0, null, 1);
    assertThat(a100.engineConfig(1).maxNumBatchedTokens()).as("vLLM's default on an A100").isEqualTo(2048);
    assertThat(a100.engineConfig(1).maxNumSeqs()).isEqualTo(256);
    assertThatThrownBy(() -> new FleetConfig(10, "w", "127.0.0.1", 65530, true, 0, 0, "", null, Presets.DEFAULT,
        null, null, null, 16, 0, 256, 8192, 0, 0, true, 0, null, 1)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void launcherReadsOptionDefaultsFromYamlAndTheCommandLineWins(@TempDir Path dir) throws Exception {
    Path cfg = dir.resolve("sim.yaml");
    Files.writeString(cfg, "workers: 3\nhttp-base-port: 9100\npreset: qwen3-8b-h100\nadapters: [x, y]\n"
        + "drop-rate: 0.25\nlayout: sglang_array\n");
    SimFleetMain main = new SimFleetMain();
    CommandLine cl = new CommandLine(main);
    cl.setDefaultValueProvider(SimFleetMain.yamlDefaults(cfg));
    cl.parseArgs("--config", cfg.toString(), "--workers", "5");
    FleetConfig fc = main.fleetConfig();
    assertThat(fc.workers()).isEqualTo(5);
    assertThat(fc.httpBasePort()).isEqualTo(9100);
    assertThat(fc.preset().id()).isEqualTo("qwen3-8b-h100");
    assertThat(fc.adapters()).containsExactly("x", "y");
    assertThat(fc.faults().dropRate()).isEqualTo(0.25);
    assertThat(fc.layout()).isEqualTo(WireLayout.SGLANG_ARRAY);
    assertThat(fc.engineConfig(0).model()).isEqualTo("Qwen/Qwen3-8B");

    Files.writeString(cfg, "wrokers: 3\n");
    assertThatThrownBy(() -> SimFleetMain.yamlDefaults(cfg)).hasMessageContaining("unknown option `wrokers`");
  }
}
