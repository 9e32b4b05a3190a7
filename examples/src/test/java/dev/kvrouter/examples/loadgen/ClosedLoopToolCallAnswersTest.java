package dev.kvrouter.examples.loadgen;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.ab.ChatFront;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.report.RunData;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.fleet.SimWorker;
import dev.kvrouter.examples.sim.http.PipelinePromptEncoder;
import dev.kvrouter.examples.sim.http.ScriptedOutput;
import dev.kvrouter.examples.sim.testing.Fixtures;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.examples.workload.WorkloadRequest;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import java.net.URI;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Coding-agent sessions ({@code multi-turn:format=messages}) through HTTP to a scripted worker (Qwen3): each turn
 * scripts its text + {@code tool_use} answer, the worker generates the template's rendering of it, the load
 * generator reads the text and the call off the stream, and the next turn, resending them, is served from the cache
 * through the end of the previous answer.
 */
@Timeout(60)
class ClosedLoopToolCallAnswersTest {

  private static final int BLOCK = 16;

  @Test
  void eachTurnIsServedFromTheCacheThroughThePreviousToolCallAnswer() throws Exception {
    session("", false);
  }

  /**
   * With thinking answers, Qwen3 drops each earlier think block once the next user message asks again (every turn
   * here does, after its tool result): the next turn's hit ends where the previous answer's think block began, the
   * previous prompt's end.
   */
  @Test
  void withThinkingAnswersEachTurnIsServedOnlyThroughThePreviousPrompt() throws Exception {
    session(",reasoning=12", true);
  }

  /**
   * Chat sessions with thinking answers ({@code format=chat,answers=model,reasoning=N}): vLLM's chat answer carries
   * the think block as {@code reasoning}, which the client resends in the assistant message; Qwen3 renders earlier
   * answers without it once a new question follows, so each turn's hit ends at the previous prompt's end. The worker
   * generates what the virtual-time engines generate ({@link ChatFront#engineAnswers}).
   */
  @Test
  void chatThinkingAnswersAreGeneratedAsInVirtualTimeAndReusedThroughThePreviousPrompt() throws Exception {
    run("multi-turn:format=chat,answers=model,reasoning=12,sessions=2,rate=20,turns=3,think=0.01,system=64,"
        + "user=8..16,output=16..32,seed=5", true);
  }

  private static void session(String options, boolean thinking) throws Exception {
    run("multi-turn:format=messages,sessions=2,rate=20,turns=3,think=0.01,system=64,"
        + "user=8..16,output=16..32,result=16..32,tools=3,tool_text=16,reminder=8,seed=5" + options, thinking);
  }

  private static void run(String spec, boolean thinking) throws Exception {
    EngineConfig config = EngineConfig.fromPreset(Presets.QWEN3_8B_H100, BLOCK).numGpuBlocks(4096).seed(3)
        .vocabSize(0).build();
    String model = config.model();
    Workload w = WorkloadCatalog.create(spec);
    ExecutorService writer = Executors.newFixedThreadPool(2);
    try (PipelinePromptEncoder encoder = PipelinePromptEncoder.load(model, Fixtures.tokenizer("qwen3"), null,
            SegmentCache.create(1 << 20));
        SimWorker worker = SimWorker.start(new SimWorker.Spec("w-agent", config, Presets.QWEN3_8B_H100
            .timingModel(), null, "127.0.0.1", 0, null, null, new ScriptedOutput(w.tokenSpace())), encoder, writer);
        LoadGenerator gen = new LoadGenerator(LoadConfig.defaults(URI.create("http://127.0.0.1:"
            + worker.httpPort()), model).withTimeouts(Duration.ofSeconds(10), Duration.ofSeconds(20))
            .withSampleInterval(Duration.ofMillis(50)))) {
      RunData run = gen.run(w, RunContext.builder("p").workers(List.of(WorkerTarget.of("w-agent",
          URI.create("http://127.0.0.1:" + worker.httpPort())))).build());
      Map<String, RequestRecord> byId = new HashMap<>();
      run.requests().forEach(r -> byId.put(r.requestId(), r));
      Function<WorkloadRequest, int[]> answers;
      try (ChatFront chat = ChatFront.load(model, Fixtures.tokenizer("qwen3"), BLOCK, null)) {
        Function<WorkloadRequest, int[]> engines = chat.engineAnswers(w, model);
        Map<String, int[]> generated = new HashMap<>();
        w.requests().forEach(r -> generated.put(r.id(), engines.apply(r)));
        answers = r -> generated.get(r.id());
      }
      int later = 0;
      for (WorkloadRequest r : w.requests()) {
        RequestRecord cur = byId.get(r.id());
        assertThat(cur.error()).as(r.id()).isNull();
        assertThat(cur.completionTokens()).as("what the virtual-time engines generate").isEqualTo(
            answers.apply(r).length);
        if (r.after() != null) {
          RequestRecord prev = byId.get(r.after());
          // the previous prompt and its generated answer but the end of turn, every full block; with thinking the
          // previous prompt only
          assertThat(cur.cachedTokens()).as(r.id()).isEqualTo(thinking ? prev.promptTokens() / BLOCK * BLOCK
              : (prev.promptTokens() + prev.completionTokens() - 1) / BLOCK * BLOCK);
          later++;
        }
      }
      assertThat(later).isEqualTo(4);
      assertThat(run.sessions().answersResentShort()).as("every text and call arrived whole").isZero();
      assertThat(run.sessions().streamedAnswers().asScripted()).isEqualTo(w.size());
    } finally {
      writer.shutdownNow();
      writer.awaitTermination(5, TimeUnit.SECONDS);
    }
  }
}
