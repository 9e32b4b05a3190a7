package dev.kvrouter.xds.registry;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WorkersFileTest {

  @Test
  void parsesEveryField() {
    List<Worker> ws = WorkersFile.parse("""
        workers:
          - name: w-1
            address: 10.0.0.5
            port: 8000
            model: Qwen/Qwen3-8B
            adapters: [alice]
            role: decode
            dp_size: 2
            block_size: 16
            weight: 3
            metrics_url: http://10.0.0.5:9000/metrics
            draining: true
            labels: {zone: a}
            events: {endpoint: "tcp://10.0.0.5:5557", replay_endpoint: "tcp://10.0.0.5:5558", topic: kv, bind: true}
          - {name: w2, address: "::1", port: 8001, model: m}
        """, "t");
    Worker w = ws.get(0);
    assertThat(w.name()).isEqualTo("w-1");
    assertThat(w.adapters()).containsExactly("alice");
    assertThat(w.role()).isEqualTo(Worker.Role.DECODE);
    assertThat(w.cacheOwners()).extracting(Object::toString).containsExactly("w-1", "w-1#dp1");
    assertThat(w.events()).isEqualTo(new Worker.EventEndpoint("tcp://10.0.0.5:5557", "tcp://10.0.0.5:5558", "kv",
        true));
    assertThat(w.draining()).isTrue();
    assertThat(w.labels()).containsEntry("zone", "a");
    assertThat(ws.get(1).effectiveMetricsUrl()).isEqualTo("http://::1:8001/metrics");
    assertThat(ws.get(1).serves("m")).isTrue();
  }

  @Test
  void reportsEveryProblemWithItsPath() {
    assertThatThrownBy(() -> WorkersFile.parse("""
        workers:
          - {name: "bad name", address: worker.local, port: 70000, model: m, colour: red}
          - {name: ok, address: 10.0.0.1, port: 1, model: m, role: boss, events: {endpoint: "http://x"}}
          - {name: ok, address: 10.0.0.2, port: 2, model: m}
        """, "w.yaml"))
        .isInstanceOf(WorkersFile.InvalidWorkersFile.class)
        .hasMessageContaining("w.yaml: workers[0]: unknown key `colour`")
        .hasMessageContaining("workers[0].name: `bad name` must match")
        .hasMessageContaining("workers[0].address: `worker.local` must be an IPv4 or IPv6 literal")
        .hasMessageContaining("workers[0].port: must be 1..65535")
        .hasMessageContaining("workers[1].role: `boss`")
        .hasMessageContaining("must be a ZMQ endpoint")
        .hasMessageContaining("workers[2].name: duplicate worker name `ok`");
  }

  @Test
  void anEmptyFileIsAnEmptyFleet() {
    assertThat(WorkersFile.parse("", "t")).isEmpty();
    assertThat(WorkersFile.parse("workers: []", "t")).isEmpty();
  }

  @Test
  void watcherFollowsTheFileAndKeepsTheLastGoodFleetOnErrors(@TempDir Path dir) throws Exception {
    Path f = dir.resolve("workers.yaml");
    Files.writeString(f, "workers: [{name: a, address: 10.0.0.1, port: 1, model: m}]");
    WorkerRegistry reg = new WorkerRegistry();
    try (WorkersFileWatcher w = new WorkersFileWatcher(f, reg)) {
      w.loadInitial();
      assertThat(reg.current().version()).isEqualTo(1);
      w.poll();
      assertThat(reg.current().version()).as("unchanged bytes, no new version").isEqualTo(1);
      Files.writeString(f, "workers: [{name: a, address: 10.0.0.1, port: 1, model: m},"
          + " {name: b, address: 10.0.0.2, port: 1, model: m}]");
      w.poll();
      assertThat(reg.current().all()).extracting(Worker::name).containsExactly("a", "b");
      Files.writeString(f, "workers: [{name: a, port: 1}]");
      w.poll();
      assertThat(reg.current().all()).hasSize(2);
      Files.delete(f);
      w.poll();
      assertThat(reg.current().all()).hasSize(2);
    }
  }

  @Test
  void initialLoadFailsLoudly(@TempDir Path dir) {
    WorkerRegistry reg = new WorkerRegistry();
    assertThatThrownBy(() -> new WorkersFileWatcher(dir.resolve("missing.yaml"), reg).loadInitial())
        .isInstanceOf(java.nio.file.NoSuchFileException.class);
  }
}
