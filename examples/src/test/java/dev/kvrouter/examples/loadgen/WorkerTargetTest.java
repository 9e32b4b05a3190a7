package dev.kvrouter.examples.loadgen;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WorkerTargetTest {

  @Test
  void readsTheRoutersWorkersFile(@TempDir Path dir) throws Exception {
    Path f = dir.resolve("workers.yaml");
    Files.writeString(f, """
        workers:
          - {name: w1, address: 127.0.0.1, port: 8001, model: m}
          - {name: w2, address: 127.0.0.1, port: 8002, model: m, metrics_url: "http://127.0.0.1:9102/metrics"}
        """);
    List<WorkerTarget> t = WorkerTarget.fromWorkersFile(f);
    assertThat(t).containsExactly(
        new WorkerTarget("w1", URI.create("http://127.0.0.1:8001"), URI.create("http://127.0.0.1:8001/metrics")),
        new WorkerTarget("w2", URI.create("http://127.0.0.1:8002"), URI.create("http://127.0.0.1:9102/metrics")));
  }

  @Test
  void parsesNameEqualsUrl() {
    assertThat(WorkerTarget.parse("a=http://10.0.0.1:8000/")).isEqualTo(new WorkerTarget("a",
        URI.create("http://10.0.0.1:8000"), URI.create("http://10.0.0.1:8000/metrics")));
    assertThatThrownBy(() -> WorkerTarget.parse("http://x")).hasMessageContaining("name=http://host:port");
  }
}
