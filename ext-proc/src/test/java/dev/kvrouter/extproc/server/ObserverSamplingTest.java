package dev.kvrouter.extproc.server;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.routing.Decision;
import dev.kvrouter.extproc.routing.Overlap;
import dev.kvrouter.extproc.routing.PromptInfo;
import dev.kvrouter.extproc.routing.RouteRequest;
import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Which responses the observer follows to their usage: the truth check's sample, and every stale-view one. */
class ObserverSamplingTest {

  private final WorkerRegistry registry = new WorkerRegistry();
  private boolean stale;

  ObserverSamplingTest() {
    registry.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m")));
  }

  private Decision decide(boolean stream) {
    Router router = Router.builder(registry)
        .overlaps(hashes -> id -> new Overlap(2, 0, 0, 0, stale))
        .nanoTime(System::nanoTime)
        .random(() -> new Random(1))
        .build();
    RouteRequest r = new RouteRequest("r", new InferenceRequest(InferenceRequest.Kind.CHAT, "m", stream, null, 8),
        null, null, null, new PromptInfo(40, 16, new long[] {1, 2}), null, 0, null);
    return router.route(r); // a fresh router: decision number 1
  }

  @Test
  void streamsAreSampledByDecisionNumberAndTheRestAlwaysFollowed() {
    Decision streamed = decide(true);
    assertThat(streamed.seq()).isEqualTo(1);
    assertThat(ObserverStream.followed(streamed, 16)).isFalse();
    assertThat(ObserverStream.followed(streamed, 1)).isTrue();
    assertThat(ObserverStream.followed(decide(false), 16)).isTrue();
    assertThat(ObserverStream.followed(decide(false), 0)).as("not streamed: read anyway").isTrue();
  }

  @Test
  void everyStreamFromAStaleViewIsFollowedUnlessChecksAreOff() {
    stale = true;
    Decision d = decide(true);
    assertThat(d.detail().chosen().overlap().stale()).isTrue();
    assertThat(d.detail().chosen().id()).isEqualTo(new WorkerId("a", 0));
    assertThat(ObserverStream.followed(d, 16)).isTrue();
    assertThat(ObserverStream.followed(d, 0)).isFalse();
  }
}
