package dev.kvrouter.examples.loadgen;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.report.RunData;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.fleet.SimWorker;
import dev.kvrouter.examples.sim.http.PipelinePromptEncoder;
import dev.kvrouter.examples.sim.http.ScriptedOutput;
import dev.kvrouter.examples.sim.testing.Fixtures;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.examples.workload.Message;
import dev.kvrouter.examples.workload.Prompt;
import dev.kvrouter.examples.workload.Segment;
import dev.kvrouter.examples.workload.TokenSpace;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadRequest;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Chat conversations with scripted chat answers through HTTP (a Llama 3.1 worker, {@code ScriptedChatAnswers}):
 * the load generator checks the streamed text against the script and, when an answer is cut short, resends the whole
 * words it received, which the worker serves from the KV it decoded.
 */
@Timeout(60)
class ClosedLoopChatAnswersTest {

  private static final int BLOCK = 16;
  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void aChatAnswerCutShortIsResentAsTheWordsReceived() throws Exception {
    Path llama = Fixtures.tokenizer("llama3_1");
    EngineConfig config = EngineConfig.fromPreset(Presets.LLAMA_3_1_8B_H100, BLOCK).numGpuBlocks(4096).seed(3)
        .build();
    String model = config.model();
    // turn 0 asks for 600 words and times out part way; turn 1 follows it at once
    TokenSpace space = TokenSpace.DEFAULT;
    Segment system = new Segment(11, 40);
    Segment user0 = new Segment(12, 30);
    Segment answer0 = new Segment(13, 600);
    Segment user1 = new Segment(14, 25);
    Prompt p0 = Prompt.chat(List.of(Message.of("system", system), Message.of("user", user0)));
    Prompt p1 = Prompt.chat(List.of(Message.of("system", system), Message.of("user", user0),
        Message.of("assistant", answer0), Message.of("user", user1)));
    WorkloadRequest t1Request = new WorkloadRequest(1, "t1", 10_000, "s", p1, 4, new Segment(15, 4), "t0");
    Workload wl = new Workload("cut", Map.of(), space, List.of(
        new WorkloadRequest(0, "t0", 0, "s", p0, 600, answer0, null), t1Request));
    ExecutorService writer = Executors.newFixedThreadPool(2);
    try (PipelinePromptEncoder encoder = PipelinePromptEncoder.load(model, llama, null, SegmentCache.create(1 << 20));
        SimWorker worker = SimWorker.start(new SimWorker.Spec("w-chat", config, Presets.LLAMA_3_1_8B_H100
            .timingModel(), null, "127.0.0.1", 0, null, null, new ScriptedOutput(space)), encoder, writer);
        LoadGenerator gen = new LoadGenerator(LoadConfig.defaults(URI.create("http://127.0.0.1:"
            + worker.httpPort()), model).withTimeouts(Duration.ofMillis(1500), Duration.ofSeconds(10))
            .withSampleInterval(Duration.ofMillis(50)))) {
      RunData run = gen.run(wl, RunContext.builder("p").workers(List.of(WorkerTarget.of("w-chat",
          URI.create("http://127.0.0.1:" + worker.httpPort())))).build());
      RequestRecord t0 = run.requests().get(0);
      RequestRecord t1 = run.requests().get(1);
      assertThat(t0.error()).isEqualTo("timeout");
      // Llama 3.1 encodes each of these words as one token: each content chunk brought one whole word
      int words = t0.contentChunks();
      assertThat(words).isBetween(1, 599);
      assertThat(t1.error()).isNull();
      // the history holds the words received, rendered by the template and tokenized again
      int[] expected = encoder.encodeChat(JSON.readTree(RequestBodies.body(wl, t1Request,
          p1.withAnswersCut(Map.of(answer0.seed(), words)), model)));
      int[] full = encoder.encodeChat(JSON.readTree(RequestBodies.body(wl, t1Request, model)));
      assertThat(t1.promptTokens()).isEqualTo(expected.length).isLessThan(full.length);
      // and the worker serves them from the KV it decoded: the first turn's prompt and the words' tokens
      int[] first = encoder.encodeChat(JSON.readTree(RequestBodies.body(wl, wl.requests().get(0), model)));
      assertThat(t1.cachedTokens()).isGreaterThanOrEqualTo((first.length + words) / BLOCK * BLOCK)
          .isGreaterThan(first.length / BLOCK * BLOCK);
      assertThat(run.sessions().answersResentShort()).isEqualTo(1);
      assertThat(run.sessions().answersResentEmpty()).isZero();
      assertThat(run.sessions().streamedAnswers().asScripted()).isEqualTo(2);
    } finally {
      writer.shutdownNow();
      writer.awaitTermination(5, TimeUnit.SECONDS);
    }
  }
}
