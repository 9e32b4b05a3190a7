package dev.kvrouter.dist;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.events.EventSource;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerSet;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class KvrouterRuntimeTest {

  private static Worker withEvents(String name, int dpSize, String endpoint, String replay) {
    return new Worker(name, "10.0.0.1", 8000, "m", List.of(), Worker.Role.BOTH,
        new Worker.EventEndpoint(endpoint, replay, "kv", false), dpSize, 16, 1, null, false, Map.of());
  }

  /**
   * workers.yaml rejects endpoints that cannot be offset per rank, but the registry takes fleets from other sources
   * too. Such a worker used to throw out of the fleet listener, so no worker of that fleet version was reconciled.
   */
  @Test
  void aWorkerWhoseEventsCannotBeFollowedIsLeftOutAndTheRestReconciled() {
    WorkerSet fleet = new WorkerSet(3, List.of(
        withEvents("a", 2, "tcp://10.0.0.1:5557", "tcp://10.0.0.1:5657"),
        withEvents("bad", 2, "ipc:///tmp/kv", null),
        Worker.simple("quiet", "10.0.0.3", 8000, "m"),
        withEvents("c", 1, "tcp://10.0.0.4:5557", null)));
    List<String> skipped = new ArrayList<>();
    List<EventSource> sources = KvrouterRuntime.eventSources(fleet, w -> 16, Set.of("m"),
        (w, e) -> skipped.add(w.name() + ": " + e.getMessage()));
    assertThat(sources).extracting(s -> s.id() + " " + s.endpoint() + " " + s.replayEndpoint()).containsExactly(
        "a tcp://10.0.0.1:5557 tcp://10.0.0.1:5657",
        "a#dp1 tcp://10.0.0.1:5558 tcp://10.0.0.1:5658",
        "c tcp://10.0.0.4:5557 null");
    assertThat(sources).allMatch(EventSource::notPrefixClosed);
    assertThat(skipped).singleElement().asString().startsWith("bad: cannot offset endpoint");
  }
}
