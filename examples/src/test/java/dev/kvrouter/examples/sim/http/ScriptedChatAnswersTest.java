package dev.kvrouter.examples.sim.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.ab.ChatFront;
import dev.kvrouter.examples.loadgen.RequestBodies;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.fleet.SimWorker;
import dev.kvrouter.examples.sim.testing.Fixtures;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.examples.workload.AnswerReuse;
import dev.kvrouter.examples.workload.ChatAnswers;
import dev.kvrouter.examples.workload.TokenSpace;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.examples.workload.WorkloadRequest;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A scripted worker answers a seeded chat request with the scripted chat answer, over real HTTP, as the virtual-time
 * A/B's engine generates it: the text (streamed and not) is the script's, cut with its end of turn by the load
 * generator's {@code max_tokens} (the answer's words: {@code finish_reason: "length"}, {@code completion_tokens}
 * exactly {@code max_tokens}), and the KV cache holds exactly the prompt and those tokens, which the next turn,
 * resending the text, is served from. The expected figures come from the virtual path's own encoder
 * ({@link ChatFront}), loaded apart from the worker's; for each real tokenizer and chat template.
 */
@Timeout(90)
class ScriptedChatAnswersTest {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private static final int BS = 16;

  /** The real tokenizers and chat templates, with the token each one ends an assistant message with. */
  static Stream<Arguments> models() {
    return Stream.of(Arguments.of("llama3_1", 128009), Arguments.of("qwen3", 151645),
        Arguments.of("deepseek_v3", 1), Arguments.of("gemma3", 106));
  }

  @ParameterizedTest
  @MethodSource("models")
  void aSeededChatRequestGetsTheScriptedAnswerAndCachesWhatTheVirtualEngineCaches(String tokenizer, int endOfTurn)
      throws Exception {
    Path dir = Fixtures.tokenizer(tokenizer);
    // Llama 3.1 8B's timing; ids not checked against its vocabulary (Qwen3's and DeepSeek V3's go past it)
    EngineConfig config = EngineConfig.fromPreset(Presets.LLAMA_3_1_8B_H100, BS).numGpuBlocks(2048).seed(3)
        .vocabSize(0).build();
    String model = config.model();
    Workload w = WorkloadCatalog.create("multi-turn:format=chat,answers=model,sessions=1,turns=2,system=40,"
        + "user=20..30,output=37..45,seed=5");
    WorkloadRequest first = w.requests().get(0);
    WorkloadRequest second = w.requests().get(1);
    assertThat(second.after()).isEqualTo(first.id());
    ExecutorService writer = Executors.newFixedThreadPool(2);
    try (ChatFront chat = ChatFront.load(model, dir, BS, null);
        PipelinePromptEncoder encoder = PipelinePromptEncoder.load(model, dir, null, SegmentCache.create(1 << 20));
        SimWorker worker = SimWorker.start(new SimWorker.Spec("w-chat", config, Presets.LLAMA_3_1_8B_H100
            .timingModel(), null, "127.0.0.1", 0, null, null, new ScriptedOutput(w.tokenSpace())), encoder, writer)) {
      ChatAnswers answers = chat.encoder().chatAnswers(w.tokenSpace());
      String text = answers.text(first.answer());
      int[] script = answers.tokens(first.answer());
      // what the model generates of it under the request's max_tokens, as the virtual-time engine does
      int[] generated = first.generated(script);
      assertThat(generated.length).as("cut by max_tokens").isEqualTo(first.outputTokens()).isLessThan(script.length);
      int[] prompt = chat.engineIds(w, model).apply(first).tokens();
      assertThat(script[script.length - 1]).as("end of turn").isEqualTo(endOfTurn);

      // not streamed
      ObjectNode body = (ObjectNode) JSON.readTree(RequestBodies.body(w, first, model));
      body.put("stream", false);
      body.remove("stream_options");
      JsonNode plain = JSON.readTree(post(worker, "/v1/chat/completions", body.toString()));
      // each of these tokenizers encodes a word as one token: only the end of turn is cut
      assertThat(plain.path("choices").get(0).path("message").path("content").asText()).isEqualTo(text);
      assertThat(plain.path("choices").get(0).path("finish_reason").asText()).isEqualTo("length");
      assertThat(plain.path("usage").path("completion_tokens").asInt()).isEqualTo(generated.length);
      assertThat(plain.path("usage").path("prompt_tokens").asInt()).isEqualTo(prompt.length);

      // streamed, as the load generator sends it: the deltas make up the text
      StringBuilder streamed = new StringBuilder();
      JsonNode usage = null;
      String finish = null;
      for (String line : post(worker, "/v1/chat/completions", new String(RequestBodies.body(w, first, model),
          java.nio.charset.StandardCharsets.UTF_8)).split("\n")) {
        if (!line.startsWith("data: ") || line.equals("data: [DONE]")) {
          continue;
        }
        JsonNode chunk = JSON.readTree(line.substring(6));
        for (JsonNode c : chunk.path("choices")) {
          streamed.append(c.path("delta").path("content").asText(""));
          if (c.hasNonNull("finish_reason")) {
            finish = c.path("finish_reason").asText();
          }
        }
        if (chunk.hasNonNull("usage")) {
          usage = chunk.get("usage");
        }
      }
      assertThat(streamed.toString()).isEqualTo(text);
      assertThat(finish).isEqualTo("length");
      assertThat(usage.path("completion_tokens").asInt()).isEqualTo(generated.length);

      // the KV cache holds the prompt and the generated tokens but the last (sampled, never fed back): a token
      // prompt that repeats them, then goes on, is served every full block of that sequence
      int computed = prompt.length + generated.length - 1;
      assertThat(computed / BS).as("the answer fills blocks of its own").isGreaterThan(prompt.length / BS + 1);
      int[] probe = new int[computed + 5];
      System.arraycopy(prompt, 0, probe, 0, prompt.length);
      System.arraycopy(generated, 0, probe, prompt.length, generated.length - 1);
      java.util.Arrays.fill(probe, computed, probe.length, 1000);
      assertThat(cachedTokens(worker, probe)).isEqualTo(computed / BS * BS);
      // and only those: the same sequence with the answer's first token changed keeps the prompt's blocks alone
      probe[prompt.length] ^= 1;
      assertThat(cachedTokens(worker, probe)).isEqualTo(prompt.length / BS * BS);

      // the next turn resends the text; served what the virtual path's ideal keeps of the answer (each of these
      // templates, without chat_template_kwargs, keeps it all: chat_answer_divergence.json)
      JsonNode next = JSON.readTree(post(worker, "/v1/chat/completions",
          body(w, second, model)));
      int cached = next.path("usage").path("prompt_tokens_details").path("cached_tokens").asInt();
      Function<WorkloadRequest, int[]> outputs = r -> r == first ? generated : null;
      Map<WorkloadRequest, Integer> served = new HashMap<>(Map.of(first, 0, second, cached));
      AnswerReuse a = AnswerReuse.compute(List.of(first, second), chat.engineIds(w, model), outputs, BS,
          served::get);
      assertThat(a.answerBlocks()).isEqualTo(computed / BS - prompt.length / BS);
      assertThat(a.keptBlocks()).isEqualTo(a.answerBlocks());
      assertThat(a.servedBlocks()).isEqualTo(a.answerBlocks());
      assertThat(cached).isGreaterThanOrEqualTo(computed / BS * BS);
    } finally {
      writer.shutdownNow();
      writer.awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  /** The next turn's chat body, not streamed (its answer is the worker's to generate; not checked here). */
  private static String body(Workload w, WorkloadRequest r, String model) throws Exception {
    ObjectNode body = (ObjectNode) JSON.readTree(RequestBodies.body(w, r, model));
    body.put("stream", false);
    body.remove("stream_options");
    return body.toString();
  }

  private static int cachedTokens(SimWorker worker, int[] prompt) throws Exception {
    ObjectNode body = JSON.createObjectNode();
    body.put("model", worker.engine().config().model());
    body.set("prompt", JSON.valueToTree(prompt));
    body.put("max_tokens", 1);
    JsonNode r = JSON.readTree(post(worker, "/v1/completions", body.toString()));
    return r.path("usage").path("prompt_tokens_details").path("cached_tokens").asInt(-1);
  }

  private static String post(SimWorker worker, String path, String body) throws Exception {
    HttpResponse<String> r = CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + worker.httpPort()
        + path)).timeout(Duration.ofSeconds(30)).header("content-type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    return r.body();
  }
}
