package dev.kvrouter.examples.ab;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.sim.testing.Fixtures;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A virtual run of a chat workload is a function of the workload, the policy and the setup, not of what the shared
 * request path saw before: its tokenizer's segment cache and chars-per-token estimate decide the router's
 * early-stop estimates, hence the load it accounts and the choices of the load-aware policies.
 */
class ChatRunDeterminismTest {

  private static final String SHAPE = "system=200,context=600,context_max=2000,turns=3..5,user=60..120,output=40..80";

  @Test
  void theSameRunGivesTheSameDecisionsWhateverRanBefore() throws Exception {
    VirtualSetup setup = VirtualSetup.defaults().withWorkers(4);
    Workload w = WorkloadCatalog.create("multi-turn:format=chat,sessions=80,rate=40,seed=3," + SHAPE);
    Workload other = WorkloadCatalog.create("multi-turn:format=chat,sessions=40,rate=20,seed=11," + SHAPE);
    try (ChatFront chat = ChatFront.load(setup.model(), Fixtures.tokenizer("llama3_1"), setup.blockSize(), null)) {
      for (String policy : List.of("least_load", "kv_aware")) {
        List<RequestRecord> first = VirtualRun.run(w, policy, setup, chat).data().requests();
        // another workload through the same request path (new segments), and a chars-per-token estimate far from
        // this text's, as traffic of another language leaves it
        VirtualRun.run(other, policy, setup, chat);
        for (int i = 0; i < 200; i++) {
          chat.encoder().resources().tokenizer().charsPerToken().observe(100, 90);
        }
        List<RequestRecord> again = VirtualRun.run(w, policy, setup, chat).data().requests();
        assertThat(again).as(policy).hasSameSizeAs(first);
        for (int i = 0; i < first.size(); i++) {
          RequestRecord a = first.get(i);
          RequestRecord b = again.get(i);
          assertThat(b.requestId()).isEqualTo(a.requestId());
          assertThat(b.servedBy()).as(policy + " " + a.requestId()).isEqualTo(a.servedBy());
          assertThat(b.cachedTokens()).as(policy + " " + a.requestId()).isEqualTo(a.cachedTokens());
          assertThat(b.ttftMicros()).as(policy + " " + a.requestId()).isEqualTo(a.ttftMicros());
        }
      }
    }
  }
}
