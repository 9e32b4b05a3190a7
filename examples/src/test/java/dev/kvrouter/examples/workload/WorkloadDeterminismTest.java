package dev.kvrouter.examples.workload;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class WorkloadDeterminismTest {

  /** Everything a request sends, rendered, so equality covers token ids and chat text. */
  static List<String> fingerprint(Workload w) {
    List<String> out = new ArrayList<>();
    for (WorkloadRequest r : w.requests()) {
      String body = r.prompt().format() == Prompt.Format.CHAT
          ? w.chatMessages(r).toString()
          : Arrays.toString(w.promptTokens(r));
      out.add(r.index() + "|" + r.id() + "|" + r.arrivalMicros() + "|" + r.sessionId() + "|" + r.outputTokens() + "|"
          + body);
    }
    return out;
  }

  @ParameterizedTest
  @ValueSource(strings = {"system-prompt:count=60", "system-prompt:count=60,format=tokens", "multi-turn:sessions=12",
      "multi-turn:sessions=12,format=tokens", "rag:count=60", "rag:count=60,format=chat", "best-of-n:groups=15",
      "unique:count=60", "image-qa:count=60", "image-qa:count=60,uuid=mixed"})
  void sameSeedGivesTheSameRequestsAndAnotherSeedDoesNot(String spec) {
    List<String> a = fingerprint(WorkloadCatalog.create(spec + ",seed=7"));
    List<String> b = fingerprint(WorkloadCatalog.create(spec + ",seed=7"));
    List<String> c = fingerprint(WorkloadCatalog.create(spec + ",seed=8"));
    assertThat(a).isNotEmpty().isEqualTo(b);
    assertThat(c).isNotEqualTo(a);
  }

  @Test
  void mooncakeReplayIsDeterministicToo() {
    assertThat(fingerprint(MooncakeReplayTest.replay("block", "32")))
        .isEqualTo(fingerprint(MooncakeReplayTest.replay("block", "32")));
  }

  @ParameterizedTest
  @ValueSource(strings = {"system-prompt", "multi-turn", "rag", "best-of-n", "unique", "image-qa"})
  void arrivalsAreSortedAndIndexed(String name) {
    Workload w = WorkloadCatalog.create(name);
    long last = 0;
    for (int i = 0; i < w.size(); i++) {
      WorkloadRequest r = w.requests().get(i);
      assertThat(r.index()).isEqualTo(i);
      assertThat(r.arrivalMicros()).isGreaterThanOrEqualTo(last);
      last = r.arrivalMicros();
    }
    assertThat(w.requests().stream().map(WorkloadRequest::id).distinct().count()).isEqualTo(w.size());
  }

  @Test
  void poissonArrivalsHaveTheAskedMeanRate() {
    Workload w = WorkloadCatalog.create("unique:count=2001,rate=50,prompt=8");
    double seconds = w.spanMicros() / 1e6;
    assertThat(2000 / seconds).isBetween(45.0, 55.0);
    Workload u = WorkloadCatalog.create("unique:count=11,rate=20,prompt=8,arrival=uniform");
    assertThat(u.requests()).extracting(WorkloadRequest::arrivalMicros)
        .containsExactly(0L, 50_000L, 100_000L, 150_000L, 200_000L, 250_000L, 300_000L, 350_000L, 400_000L,
            450_000L, 500_000L);
  }
}
