package dev.kvrouter.examples.sim.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.workload.ChatAnswers;
import dev.kvrouter.examples.workload.Segment;
import dev.kvrouter.examples.workload.TokenSpace;
import java.net.http.HttpResponse;
import java.util.List;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Why an answer ended, on every endpoint, streamed and not, as vLLM's stop check decides it: the model's end of turn
 * within {@code max_tokens} is {@code stop} (Responses {@code completed}), and it is checked before the length, so
 * an answer of exactly {@code max_tokens} tokens still stops; an answer cut by {@code max_tokens} is {@code length}
 * (Responses {@code incomplete} / {@code max_output_tokens}, Messages {@code max_tokens}) with exactly
 * {@code max_tokens} tokens generated, never more; {@code ignore_eos} runs past the end of turn to the length. The
 * scripted chat answers are the only output with an end of turn; the Anthropic request has no {@code seed} to name
 * one, so Messages answers always run to {@code max_tokens}.
 */
@Timeout(60)
class FinishReasonTest {

  private static final ObjectMapper JSON = QwenHttpWorker.JSON;
  private static final long SEED = 77;
  private static final int WORDS = 12;

  @RegisterExtension
  static final QwenHttpWorker worker = new QwenHttpWorker("w-finish", 5, new ScriptedOutput(TokenSpace.DEFAULT));

  /** The answer the worker scripts under {@link #SEED}: the text's tokens, then Qwen3's end of turn. */
  private static int[] script() {
    return answers().tokens(new Segment(SEED, WORDS));
  }

  private static ChatAnswers answers() {
    return worker.encoder().chatAnswers(TokenSpace.DEFAULT);
  }

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void completionsRunToMaxTokens(boolean stream) throws Exception {
    ObjectNode body = JSON.createObjectNode().put("model", worker.model()).put("prompt", "the quick brown fox")
        .put("max_tokens", 5);
    Outcome o = openAi("/v1/completions", body, stream);
    assertThat(o.finish()).isEqualTo("length");
    assertThat(o.completionTokens()).isEqualTo(5);
  }

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void aScriptedChatAnswerNamedByMaxTokensIsCutBeforeItsEndOfTurn(boolean stream) throws Exception {
    // the load generator's body: max_tokens is the answer's length in words, which leaves no room for the end of turn
    int[] script = script();
    assertThat(script.length).as("one token per word, then the end of turn").isEqualTo(WORDS + 1);
    Outcome o = openAi("/v1/chat/completions", chat().put("max_tokens", WORDS).put("ignore_eos", true), stream);
    assertThat(o.finish()).isEqualTo("length");
    assertThat(o.completionTokens()).isEqualTo(WORDS);
    assertThat(o.text()).isEqualTo(answers().text(new Segment(SEED, WORDS)));
  }

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void aScriptedChatAnswerWithRoomEndsItsTurn(boolean stream) throws Exception {
    int[] script = script();
    // exactly max_tokens tokens: the end of turn is checked before the length
    for (int max : new int[] {script.length, script.length + 20}) {
      Outcome o = openAi("/v1/chat/completions", named(chat()).put("max_tokens", max), stream);
      assertThat(o.finish()).as("max_tokens %d", max).isEqualTo("stop");
      assertThat(o.completionTokens()).isEqualTo(script.length);
      assertThat(o.text()).isEqualTo(answers().text(new Segment(SEED, WORDS)));
    }
    // one token short: cut
    Outcome cut = openAi("/v1/chat/completions", named(chat()).put("max_tokens", script.length - 1), stream);
    assertThat(cut.finish()).isEqualTo("length");
    assertThat(cut.completionTokens()).isEqualTo(script.length - 1);
  }

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void ignoreEosRunsPastTheEndOfTurnToMaxTokens(boolean stream) throws Exception {
    int max = script().length + 7;
    Outcome o = openAi("/v1/chat/completions", named(chat()).put("max_tokens", max).put("ignore_eos", true),
        stream);
    assertThat(o.finish()).isEqualTo("length");
    assertThat(o.completionTokens()).isEqualTo(max);
    assertThat(o.text()).startsWith(answers().text(new Segment(SEED, WORDS)));
  }

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void anUnscriptedChatAnswerRunsToMaxTokens(boolean stream) throws Exception {
    ObjectNode body = chat().put("max_tokens", 6);
    body.remove("seed");
    Outcome o = openAi("/v1/chat/completions", body, stream);
    assertThat(o.finish()).isEqualTo("length");
    assertThat(o.completionTokens()).isEqualTo(6);
  }

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void aResponsesAnswerIsCompletedWhenItEndsAndIncompleteWhenCut(boolean stream) throws Exception {
    int[] script = script();
    JsonNode ended = responses(named(responsesBody()).put("max_output_tokens", script.length + 3), stream);
    assertThat(ended.path("status").asText()).isEqualTo("completed");
    assertThat(ended.path("incomplete_details").isNull()).isTrue();
    assertThat(ended.path("usage").path("output_tokens").asInt()).isEqualTo(script.length);
    assertThat(ended.path("output").get(0).path("content").get(0).path("text").asText())
        .isEqualTo(answers().text(new Segment(SEED, WORDS)));

    JsonNode cut = responses(responsesBody().put("max_output_tokens", WORDS), stream);
    assertThat(cut.path("status").asText()).isEqualTo("incomplete");
    assertThat(cut.path("incomplete_details").path("reason").asText()).isEqualTo("max_output_tokens");
    assertThat(cut.path("usage").path("output_tokens").asInt()).isEqualTo(WORDS);
  }

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void aMessagesAnswerRunsToMaxTokens(boolean stream) throws Exception {
    ObjectNode body = JSON.createObjectNode().put("model", worker.model()).put("max_tokens", 4)
        .put("stream", stream);
    body.putArray("messages").addObject().put("role", "user").put("content", "hello there");
    HttpResponse<String> r = worker.post("/v1/messages", body);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    JsonNode message;
    if (stream) {
      List<JsonNode> events = QwenHttpWorker.events(r.body());
      message = events.stream().filter(e -> e.path("type").asText().equals("message_delta")).findFirst()
          .orElseThrow();
      assertThat(message.path("delta").path("stop_reason").asText()).isEqualTo("max_tokens");
    } else {
      message = JSON.readTree(r.body());
      assertThat(message.path("stop_reason").asText()).isEqualTo("max_tokens");
    }
    assertThat(message.path("usage").path("output_tokens").asInt()).isEqualTo(4);
  }

  private static ObjectNode chat() {
    ObjectNode body = JSON.createObjectNode().put("model", worker.model()).put("seed", SEED);
    body.putArray("messages").addObject().put("role", "user").put("content", "say something");
    return body;
  }

  private static ObjectNode responsesBody() {
    return JSON.createObjectNode().put("model", worker.model()).put("seed", SEED).put("input", "say something");
  }

  /** Names the scripted answer's length apart from {@code max_tokens}. */
  private static ObjectNode named(ObjectNode body) {
    body.putObject("vllm_xargs").put("answer_words", WORDS);
    return body;
  }

  private record Outcome(String finish, int completionTokens, String text) {}

  /** A completion or chat answer's finish reason, completion tokens and text, streamed (with usage) or not. */
  private static Outcome openAi(String path, ObjectNode body, boolean stream) throws Exception {
    body.put("stream", stream);
    if (stream) {
      body.putObject("stream_options").put("include_usage", true);
    }
    HttpResponse<String> r = worker.post(path, body);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    boolean chat = path.contains("chat");
    if (!stream) {
      JsonNode n = JSON.readTree(r.body());
      JsonNode c = n.path("choices").get(0);
      return new Outcome(c.path("finish_reason").asText(), n.path("usage").path("completion_tokens").asInt(),
          chat ? c.path("message").path("content").asText() : c.path("text").asText());
    }
    String finish = null;
    int finishes = 0;
    int tokens = -1;
    StringBuilder text = new StringBuilder();
    for (String line : r.body().split("\n")) {
      if (!line.startsWith("data: ") || line.equals("data: [DONE]")) {
        continue;
      }
      JsonNode chunk = JSON.readTree(line.substring(6));
      for (JsonNode c : chunk.path("choices")) {
        text.append(chat ? c.path("delta").path("content").asText("") : c.path("text").asText(""));
        if (c.hasNonNull("finish_reason")) {
          finish = c.path("finish_reason").asText();
          finishes++;
        }
      }
      if (chunk.hasNonNull("usage")) {
        tokens = chunk.path("usage").path("completion_tokens").asInt();
      }
    }
    assertThat(finishes).as("one chunk carries the finish reason").isEqualTo(1);
    return new Outcome(finish, tokens, text.toString());
  }

  /** The Responses object: the body, or the streamed {@code response.completed} event's. */
  private static JsonNode responses(ObjectNode body, boolean stream) throws Exception {
    body.put("stream", stream);
    HttpResponse<String> r = worker.post("/v1/responses", body);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    if (!stream) {
      return JSON.readTree(r.body());
    }
    List<JsonNode> events = QwenHttpWorker.events(r.body());
    JsonNode last = events.get(events.size() - 1);
    assertThat(last.path("type").asText()).isEqualTo("response.completed");
    return last.path("response");
  }
}
