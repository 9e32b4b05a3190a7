package dev.kvrouter.examples.loadgen;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.report.RunData;
import dev.kvrouter.examples.report.Sessions;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.fleet.SimWorker;
import dev.kvrouter.examples.sim.http.PromptEncoder;
import dev.kvrouter.examples.sim.http.ScriptedOutput;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.examples.workload.Prompt;
import dev.kvrouter.examples.workload.Segment;
import dev.kvrouter.examples.workload.TokenSpace;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.net.URI;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Conversations through HTTP against a real simulated vLLM worker generating the scripted answers
 * ({@link ScriptedOutput}): each later turn waits for the previous one, resends the model's own answer (so the
 * worker serves it from the KV it decoded) and, when the answer came back short, resends it as received.
 */
@Timeout(60)
class ClosedLoopConversationTest {

  private static final int BLOCK = 16;

  private ExecutorService writer;
  private SimWorker worker;

  @BeforeEach
  void start() throws Exception {
    writer = Executors.newFixedThreadPool(2);
    EngineConfig config = EngineConfig.fromPreset(Presets.LLAMA_3_1_8B_H100, BLOCK).numGpuBlocks(4096).seed(3)
        .build();
    worker = SimWorker.start(new SimWorker.Spec("w-loop", config, Presets.LLAMA_3_1_8B_H100.timingModel(), null,
        "127.0.0.1", 0, null, null, new ScriptedOutput(TokenSpace.DEFAULT)), PromptEncoder.tokenIdsOnly(), writer);
  }

  @AfterEach
  void stop() throws Exception {
    worker.close();
    writer.shutdownNow();
    writer.awaitTermination(5, TimeUnit.SECONDS);
  }

  private LoadConfig config(Duration requestTimeout) {
    return LoadConfig.defaults(URI.create("http://127.0.0.1:" + worker.httpPort()), worker.engine().config().model())
        .withTimeouts(requestTimeout, Duration.ofSeconds(10)).withSampleInterval(Duration.ofMillis(50));
  }

  private RunContext context() {
    return RunContext.builder("p")
        .workers(List.of(WorkerTarget.of("w-loop", URI.create("http://127.0.0.1:" + worker.httpPort())))).build();
  }

  @Test
  void laterTurnsWaitForTheAnswerAndFindItCachedOnTheWorker() throws Exception {
    // think 10 ms: every later turn is planned long before the previous answer (20-40 decode steps) is back
    Workload wl = WorkloadCatalog.create("multi-turn:format=tokens,sessions=4,rate=20,turns=3..4,think=0.01,"
        + "system=32,user=20..40,output=20..40");
    assertThat(wl.scriptsAnswers()).isTrue();
    Map<String, WorkloadRequest> byId = new HashMap<>();
    wl.requests().forEach(r -> byId.put(r.id(), r));
    try (LoadGenerator gen = new LoadGenerator(config(Duration.ofSeconds(20)))) {
      RunData run = gen.run(wl, context());
      assertThat(run.requests()).hasSize(wl.size()).allSatisfy(r -> assertThat(r.error()).isNull());
      int dependent = 0;
      for (WorkloadRequest r : wl.requests()) {
        if (r.after() == null) {
          continue;
        }
        dependent++;
        WorkloadRequest p = byId.get(r.after());
        RequestRecord rec = run.requests().get(r.index());
        RequestRecord prev = run.requests().get(p.index());
        // not sent before the previous turn's response ended, as the client saw it (same clock, same origin)
        assertThat(rec.sentMicros()).as(r.id()).isGreaterThanOrEqualTo(prev.sentMicros() + prev.e2eMicros());
        // due at its plan or at the previous turn's completion, whichever is later; sent from then on
        assertThat(rec.scheduledMicros()).isGreaterThanOrEqualTo(Math.max(r.arrivalMicros(),
            prev.sentMicros() + prev.e2eMicros()));
        assertThat(rec.sentMicros()).isGreaterThanOrEqualTo(rec.scheduledMicros());
        assertThat(prev.completionTokens()).isEqualTo(p.outputTokens());
        // the worker that served the previous turn cached its prompt and the answer it decoded, all but the last
        // token (whose KV is never computed), in full blocks; the new user message is not cached anywhere
        int previousTokens = p.prompt().contentLength() + p.outputTokens();
        assertThat(rec.promptTokens()).isEqualTo(r.prompt().contentLength());
        assertThat(rec.cachedTokens()).as(r.id()).isEqualTo((previousTokens - 1) / BLOCK * BLOCK);
      }
      assertThat(dependent).isGreaterThan(4);
      String loop = run.notes().stream().filter(n -> n.startsWith("closed loop:")).findFirst().orElseThrow();
      // most later turns were planned before their previous answer came back, so were held
      int heldBack = Integer.parseInt(loop.substring("closed loop: ".length(), loop.indexOf(" of ")));
      assertThat(heldBack).isBetween(dependent / 2, dependent);
      assertThat(loop).contains(" of " + dependent + " dependent turns held back");
      assertThat(run.notes()).contains("model answers: all " + wl.size() + " streamed answers were the scripted "
          + "tokens");
      // the report's structured figures say what the notes say
      Sessions sessions = run.sessions();
      assertThat(sessions.modelAnswers()).isTrue();
      assertThat(sessions.dependentTurns()).isEqualTo(dependent);
      assertThat(sessions.heldBack()).isEqualTo(heldBack);
      assertThat(sessions.heldBackSeconds()).isPositive();
      assertThat(sessions.meanHeldBackSeconds()).isCloseTo(sessions.heldBackSeconds() / heldBack, within(1e-5))
          .isLessThanOrEqualTo(sessions.maxHeldBackSeconds());
      assertThat(sessions.maxHeldBackSeconds()).isLessThanOrEqualTo(sessions.heldBackSeconds());
      assertThat(sessions.answersResentShort()).isZero();
      assertThat(sessions.answersResentEmpty()).isZero();
      assertThat(sessions.streamedAnswers()).isEqualTo(new Sessions.StreamedAnswers(wl.size(), 0, 0));
    }
  }

  @Test
  void anOpenLoopRunHasNoSessions() throws Exception {
    Workload wl = WorkloadCatalog.create("system-prompt:format=tokens,count=3,rate=50,prompt=64,output=2");
    try (LoadGenerator gen = new LoadGenerator(config(Duration.ofSeconds(20)))) {
      RunData run = gen.run(wl, context());
      assertThat(run.requests()).allSatisfy(r -> assertThat(r.error()).isNull());
      assertThat(run.sessions()).isNull();
      assertThat(run.notes()).noneSatisfy(n -> assertThat(n).startsWith("closed loop:"));
    }
  }

  @Test
  void anAnswerCutShortIsResentAsReceived() throws Exception {
    // turn 0 asks for 1,500 tokens and times out part way; turn 1 (4 tokens) follows it at once
    TokenSpace space = TokenSpace.DEFAULT;
    Segment system = new Segment(11, 40);
    Segment user0 = new Segment(12, 30);
    Segment answer0 = new Segment(13, 1500);
    Segment user1 = new Segment(14, 25);
    Prompt p0 = Prompt.tokens(List.of(system, user0));
    Prompt p1 = Prompt.tokens(List.of(system, user0, answer0, user1));
    Workload wl = new Workload("cut", Map.of(), space, List.of(
        new WorkloadRequest(0, "t0", 0, "s", p0, 1500, answer0, null),
        new WorkloadRequest(1, "t1", 10_000, "s", p1, 4, new Segment(15, 4), "t0")));
    try (LoadGenerator gen = new LoadGenerator(config(Duration.ofMillis(1500)))) {
      RunData run = gen.run(wl, context());
      RequestRecord t0 = run.requests().get(0);
      RequestRecord t1 = run.requests().get(1);
      assertThat(t0.error()).isEqualTo("timeout");
      int received = t0.contentChunks();
      assertThat(received).isBetween(1, 1499);
      assertThat(t1.error()).isNull();
      assertThat(t1.sentMicros()).isGreaterThanOrEqualTo(t0.sentMicros() + t0.e2eMicros());
      // the history holds the tokens streamed, not the 1,500 scripted
      assertThat(t1.promptTokens()).isEqualTo(40 + 30 + received + 25);
      // and those are the worker's own tokens: it serves them from the KV it decoded (all but the last)
      assertThat(t1.cachedTokens()).isGreaterThanOrEqualTo((40 + 30 + received - 1) / BLOCK * BLOCK);
      assertThat(run.notes()).anySatisfy(n -> assertThat(n).startsWith("closed loop: 1 of 1 dependent turns held "
          + "back").endsWith("; model answers, 1 resent short"));
      assertThat(run.sessions().heldBack()).isEqualTo(1);
      assertThat(run.sessions().meanHeldBackSeconds()).isEqualTo(run.sessions().maxHeldBackSeconds())
          .isEqualTo(run.sessions().heldBackSeconds()).isPositive();
      // cut, not lost: received in part
      assertThat(run.sessions().answersResentShort()).isEqualTo(1);
      assertThat(run.sessions().answersResentEmpty()).isZero();
      assertThat(run.sessions().streamedAnswers().total()).isEqualTo(2);
    }
  }
}
