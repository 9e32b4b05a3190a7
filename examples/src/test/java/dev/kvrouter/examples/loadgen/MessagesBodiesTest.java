package dev.kvrouter.examples.loadgen;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.ab.ChatFront;
import dev.kvrouter.examples.ab.VirtualOutcome;
import dev.kvrouter.examples.ab.VirtualRun;
import dev.kvrouter.examples.ab.VirtualSetup;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.sim.testing.Fixtures;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.examples.workload.PromptIds;
import dev.kvrouter.examples.workload.ToolCallAnswer;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * {@code multi-turn:format=messages}: the bodies are Claude Code's {@code /v1/messages} requests, and under the
 * router's own Messages conversion (Qwen3's template, which keeps inline system messages in place) every turn renders
 * as an extension of the previous turn's prompt, the per-request attribution block and the moving cache breakpoint
 * notwithstanding.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MessagesBodiesTest {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String SPEC = "multi-turn:format=messages,sessions=6,rate=2,turns=3..5,think=2,system=300,"
      + "user=8..24,output=16..48,result=32..96,seed=9";
  private static final VirtualSetup SETUP = VirtualSetup.defaults().withPreset(Presets.QWEN3_8B_H100).withWorkers(4)
      .withNumGpuBlocks(8192);

  private ChatFront chat;

  @BeforeAll
  void load() throws Exception {
    chat = ChatFront.load(SETUP.model(), Fixtures.tokenizer("qwen3"), SETUP.blockSize(), null);
  }

  @AfterAll
  void close() {
    if (chat != null) {
      chat.close();
    }
  }

  @Test
  void aLaterTurnIsAClaudeCodeRequest() throws Exception {
    Workload w = WorkloadCatalog.create(SPEC);
    WorkloadRequest r = sessionTurns(w).values().stream().filter(t -> t.size() >= 3).findFirst().orElseThrow().get(2);
    assertThat(RequestBodies.path(r)).isEqualTo("/v1/messages");
    JsonNode b = JSON.readTree(RequestBodies.body(w, r, "m"));
    assertThat(b.path("stream").asBoolean()).isTrue();
    assertThat(b.path("max_tokens").asInt()).as("Claude Code's: the answer ends at its tool call").isEqualTo(32000);
    assertThat(b.has("seed") || b.has("ignore_eos") || b.has("stream_options")).as("not Anthropic's").isFalse();

    JsonNode system = b.get("system");
    assertThat(system).hasSize(3);
    assertThat(system.get(0).path("text").asText()).startsWith("x-anthropic-billing-header: ").contains("; cch=");
    assertThat(system.get(1).path("text").asText()).startsWith("You are Claude Code");
    assertThat(system.get(2).path("cache_control").path("type").asText()).isEqualTo("ephemeral");
    WorkloadRequest other = w.requests().get(r.index() == 0 ? 1 : 0);
    assertThat(JSON.readTree(RequestBodies.body(w, other, "m")).get("system").get(0))
        .as("the attribution hash changes per request").isNotEqualTo(system.get(0));

    JsonNode tools = b.get("tools");
    assertThat(tools).hasSize(12);
    Set<String> names = new HashSet<>();
    for (JsonNode t : tools) {
      names.add(t.path("name").asText());
      JsonNode schema = t.get("input_schema");
      assertThat(schema.path("type").asText()).isEqualTo("object");
      assertThat(schema.path("properties").has(schema.path("required").get(0).asText())).isTrue();
      assertThat(t.path("description").asText().split(" ").length).isGreaterThan(160);
    }
    assertThat(names).hasSize(12).contains("Bash", "Read", "Edit", "Grep");
    assertThat(JSON.readTree(RequestBodies.body(w, other, "m")).get("tools")).as("one tool list for all").isEqualTo(tools);

    // turn 2: user, reminder, assistant, user (tool result + text), reminder, assistant, user, reminder
    JsonNode ms = b.get("messages");
    List<String> roles = new ArrayList<>();
    ms.forEach(m -> roles.add(m.path("role").asText()));
    assertThat(roles).containsExactly("user", "system", "assistant", "user", "system", "assistant", "user", "system");
    for (int k = 0; k < 3; k++) {
      JsonNode reminder = ms.get(3 * k + 1).path("content");
      assertThat(reminder.asText()).startsWith("<system-reminder>\n").endsWith("\n</system-reminder>");
    }
    String previousToolUse = null;
    int breakpoints = 0;
    for (JsonNode m : ms) {
      JsonNode content = m.path("content");
      if (m.path("role").asText().equals("assistant")) {
        assertThat(content).hasSize(2);
        assertThat(content.get(0).path("type").asText()).isEqualTo("text");
        JsonNode use = content.get(1);
        assertThat(use.path("type").asText()).isEqualTo("tool_use");
        assertThat(use.path("id").asText()).startsWith("toolu_");
        assertThat(names).contains(use.path("name").asText());
        assertThat(use.path("input").size()).isOne();
        previousToolUse = use.path("id").asText();
      } else if (m.path("role").asText().equals("user")) {
        JsonNode last = content.get(content.size() - 1);
        assertThat(last.path("type").asText()).isEqualTo("text");
        breakpoints += last.has("cache_control") ? 1 : 0;
        if (previousToolUse == null) {
          assertThat(content).hasSize(1);
        } else {
          assertThat(content).hasSize(2);
          assertThat(content.get(0).path("type").asText()).isEqualTo("tool_result");
          assertThat(content.get(0).path("tool_use_id").asText()).isEqualTo(previousToolUse);
        }
      }
    }
    assertThat(breakpoints).as("only the newest user block").isOne();
    assertThat(ms.get(6).path("content").get(1).has("cache_control")).isTrue();
  }

  @Test
  void eachRequestScriptsTheToolCallAnswerTheNextTurnResends() throws Exception {
    Workload w = WorkloadCatalog.create(SPEC);
    int checked = 0;
    for (List<WorkloadRequest> turns : sessionTurns(w).values()) {
      for (int k = 0; k + 1 < turns.size(); k++) {
        JsonNode xargs = JSON.readTree(RequestBodies.body(w, turns.get(k), "m")).get("vllm_xargs");
        ToolCallAnswer answer = ToolCallAnswer.fromXargs(xargs);
        assertThat(answer).as(turns.get(k).id()).isNotNull();
        assertThat(answer.calls()).hasSize(1);
        JsonNode ms = JSON.readTree(RequestBodies.body(w, turns.get(k + 1), "m")).get("messages");
        JsonNode resent = null;
        for (JsonNode m : ms) {
          resent = m.path("role").asText().equals("assistant") ? m.path("content") : resent;
        }
        assertThat(resent.get(0).path("text").asText()).isEqualTo(answer.text());
        ToolCallAnswer.Call call = answer.calls().get(0);
        assertThat(resent.get(1).path("id").asText()).isEqualTo(call.id());
        assertThat(resent.get(1).path("name").asText()).isEqualTo(call.name());
        assertThat(JSON.convertValue(resent.get(1).path("input"), Map.class)).isEqualTo(call.input());
        // the next turn's tool result answers that call
        assertThat(ms.toString()).contains("\"tool_use_id\":\"" + call.id() + "\"");
        checked++;
      }
    }
    assertThat(checked).isGreaterThanOrEqualTo(12);
    // with thinking answers: the script carries the reasoning and the next turn resends it first, as a thinking block
    Workload thinking = WorkloadCatalog.create(SPEC + ",reasoning=8");
    List<WorkloadRequest> turns = sessionTurns(thinking).values().iterator().next();
    ToolCallAnswer scripted = ToolCallAnswer.fromXargs(JSON.readTree(RequestBodies.body(thinking, turns.get(0), "m"))
        .get("vllm_xargs"));
    assertThat(scripted.reasoning().split(" ", -1)).hasSizeGreaterThanOrEqualTo(8);
    JsonNode resent = null;
    for (JsonNode m : JSON.readTree(RequestBodies.body(thinking, turns.get(1), "m")).get("messages")) {
      resent = m.path("role").asText().equals("assistant") ? m.path("content") : resent;
    }
    assertThat(resent.get(0).path("type").asText()).isEqualTo("thinking");
    assertThat(resent.get(0).path("thinking").asText()).isEqualTo(scripted.reasoning());
    assertThat(resent.get(1).path("text").asText()).isEqualTo(scripted.text());
    WorkloadRequest fresh = WorkloadCatalog.create(SPEC + ",answers=fresh").requests().get(0);
    assertThat(fresh.answer()).isNull();
    assertThat(JSON.readTree(RequestBodies.body(w, fresh, "m")).has("vllm_xargs")).isFalse();
  }

  @Test
  void eachTurnRendersAsAnExtensionOfThePreviousTurnsPromptUnderTheRoutersConversion() {
    Workload w = WorkloadCatalog.create(SPEC);
    Function<WorkloadRequest, PromptIds> ids = chat.engineIds(w, SETUP.model());
    int extended = 0;
    for (List<WorkloadRequest> turns : sessionTurns(w).values()) {
      int[] previous = null;
      for (WorkloadRequest r : turns) {
        int[] t = ids.apply(r).tokens();
        if (previous == null) {
          // system prompt, identity line and the tools ahead of the first question: a few thousand tokens
          assertThat(t.length).as(r.id()).isBetween(3_000, 6_000);
        } else {
          assertThat(t.length).isGreaterThan(previous.length);
          // the first differing token, -1 for none: a mismatch shows where, not two 10k-token arrays
          assertThat(java.util.Arrays.mismatch(java.util.Arrays.copyOf(t, previous.length), previous))
              .as(r.id() + " extends the previous turn").isEqualTo(-1);
          extended++;
        }
        previous = t;
      }
    }
    assertThat(extended).isGreaterThanOrEqualTo(12);
  }

  @Test
  void virtualTimeRoutesThemThroughTheMessagesPathAndKeepsSessionsOnTheirCache() {
    Workload w = WorkloadCatalog.create(SPEC);
    VirtualOutcome o = VirtualRun.run(w, "kv_aware", SETUP, chat);
    assertThat(o.fallbacks()).as("every prompt converted, none routed by load").isEmpty();
    Map<String, RequestRecord> byId = new HashMap<>();
    o.data().requests().forEach(x -> byId.put(x.requestId(), x));
    Function<WorkloadRequest, PromptIds> ids = chat.engineIds(w, SETUP.model());
    Function<WorkloadRequest, int[]> answers = chat.engineAnswers(w, SETUP.model());
    int later = 0;
    for (List<WorkloadRequest> turns : sessionTurns(w).values()) {
      for (int k = 0; k < turns.size(); k++) {
        RequestRecord cur = byId.get(turns.get(k).id());
        assertThat(cur.error()).as(cur.requestId()).isNull();
        assertThat(cur.promptTokens()).isEqualTo(ids.apply(turns.get(k)).tokens().length);
        if (k > 0) {
          later++;
          RequestRecord prev = byId.get(turns.get(k - 1).id());
          assertThat(cur.servedBy()).as(cur.requestId()).isEqualTo(prev.servedBy());
          // the previous prompt and the tool-call answer the engine generated (all but its end of turn, which is
          // sampled and never fed back), which the history resends token for token: every full block of them
          assertThat(prev.completionTokens()).isEqualTo(answers.apply(turns.get(k - 1)).length);
          assertThat(cur.cachedTokens()).as(cur.requestId()).isGreaterThanOrEqualTo(
              (prev.promptTokens() + prev.completionTokens() - 1) / SETUP.blockSize() * SETUP.blockSize());
        }
      }
    }
    assertThat(later).isGreaterThanOrEqualTo(12);
  }

  /**
   * With thinking answers ({@code reasoning=N}) the engines generate the think block too (the same tokens as an HTTP
   * worker), and as each next turn asks a new question Qwen3 renders the previous answer without it: the hit ends
   * where the think block began, the previous prompt's end.
   */
  @Test
  void virtualTimeThinkingAnswersAreGeneratedAndReusedOnlyUpToTheirThinkBlock() {
    assertThinkingAnswersReusedThroughThePreviousPrompt(WorkloadCatalog.create(SPEC + ",reasoning=16"));
  }

  /**
   * Runs {@code w} in virtual time: every answer opens with its think block and ends its turn, and every later turn
   * is served from the cache through the previous prompt, no further.
   */
  private void assertThinkingAnswersReusedThroughThePreviousPrompt(Workload w) {
    VirtualOutcome o = VirtualRun.run(w, "kv_aware", SETUP, chat);
    Map<String, RequestRecord> byId = new HashMap<>();
    o.data().requests().forEach(x -> byId.put(x.requestId(), x));
    Function<WorkloadRequest, int[]> answers = chat.engineAnswers(w, SETUP.model());
    int thinkToken = chat.encoder().resources().tokenizer().encode("<think>", false)[0];
    int later = 0;
    for (List<WorkloadRequest> turns : sessionTurns(w).values()) {
      for (int k = 1; k < turns.size(); k++) {
        RequestRecord cur = byId.get(turns.get(k).id());
        RequestRecord prev = byId.get(turns.get(k - 1).id());
        assertThat(cur.error()).as(cur.requestId()).isNull();
        int[] answer = answers.apply(turns.get(k - 1));
        assertThat(answer[0]).as("the engine opens its think block").isEqualTo(thinkToken);
        assertThat(answer[answer.length - 1]).as("and ends its turn").isEqualTo(chat.encoder().endOfTurnToken());
        assertThat(prev.completionTokens()).isEqualTo(answer.length);
        assertThat(cur.cachedTokens()).as(cur.requestId())
            .isEqualTo(prev.promptTokens() / SETUP.blockSize() * SETUP.blockSize());
        later++;
      }
    }
    assertThat(later).isGreaterThanOrEqualTo(12);
  }

  /**
   * Chat sessions with thinking answers ({@code format=chat,answers=model,reasoning=N}): the engines generate the think
   * block before the text and end the turn, the client resends it as the assistant message's {@code reasoning}, and
   * as each next turn asks a new question Qwen3 renders the answer without it: the hit ends at the previous prompt's
   * end, as with Messages.
   */
  @Test
  void virtualTimeChatThinkingAnswersAreGeneratedAndResentAsReasoning() throws Exception {
    Workload w = WorkloadCatalog.create("multi-turn:format=chat,answers=model,reasoning=16,sessions=6,rate=2,"
        + "turns=3..5,think=2,system=300,user=8..24,output=16..48,seed=9");
    assertThinkingAnswersReusedThroughThePreviousPrompt(w);
    JsonNode body = JSON.readTree(RequestBodies.body(w, sessionTurns(w).values().iterator().next().get(1),
        SETUP.model()));
    JsonNode assistant = body.path("messages").get(2);
    assertThat(assistant.path("role").asText()).isEqualTo("assistant");
    assertThat(assistant.path("reasoning").asText()).as("resent as vLLM returned it").isNotEmpty();
    assertThat(body.path("vllm_xargs").path("answer_reasoning").asText()).isNotEmpty();
    assertThat(body.has("ignore_eos")).as("the answer ends its turn").isFalse();
  }

  @Test
  void messagesIsForMultiTurnSessionsWithModelAnswersByDefault() {
    assertThatThrownBy(() -> WorkloadCatalog.create("unique:format=messages"))
        .hasMessageContaining("multi-turn sessions only");
    assertThat(WorkloadCatalog.create("multi-turn:format=messages,sessions=2").scriptsAnswers()).isTrue();
    assertThat(WorkloadCatalog.create("multi-turn:format=messages,sessions=2,answers=fresh").scriptsAnswers())
        .isFalse();
    assertThatThrownBy(() -> WorkloadCatalog.create("multi-turn:format=chat,tools=4"))
        .hasMessageContaining("unknown option");
    assertThatThrownBy(() -> WorkloadCatalog.create("multi-turn:format=messages,answers=fresh,reasoning=8"))
        .hasMessageContaining("reasoning needs answers=model");
    assertThatThrownBy(() -> WorkloadCatalog.create("multi-turn:format=messages,tools=17"))
        .hasMessageContaining("tools must be");
    assertThatThrownBy(() -> VirtualRun.run(WorkloadCatalog.create(SPEC), "kv_aware", SETUP, null))
        .hasMessageContaining("--tokenizer");
  }

  private static Map<String, List<WorkloadRequest>> sessionTurns(Workload w) {
    Map<String, List<WorkloadRequest>> m = new java.util.LinkedHashMap<>();
    for (WorkloadRequest r : w.requests()) {
      m.computeIfAbsent(r.sessionId(), s -> new ArrayList<>()).add(r);
    }
    m.values().forEach(l -> l.sort(java.util.Comparator.comparingInt(x -> Integer.parseInt(
        x.id().substring(x.id().lastIndexOf('-') + 1)))));
    return m;
  }
}
