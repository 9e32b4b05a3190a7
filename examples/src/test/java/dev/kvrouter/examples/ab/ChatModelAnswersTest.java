package dev.kvrouter.examples.ab;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.loadgen.RequestBodies;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.sim.testing.Fixtures;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.examples.workload.AnswerReuse;
import dev.kvrouter.examples.workload.ChatAnswers;
import dev.kvrouter.examples.workload.Prompt;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Chat conversations that resend the model's own answer as text ({@code multi-turn:format=chat,answers=model}):
 * the engine generates the tokens of the scripted answer text, cut before the template's end-of-turn token by the
 * request's {@code max_tokens} (the answer's words) as vLLM cuts it, the client
 * resends the text as the assistant message, closed loop, and the next prompt is the re-rendered history. With
 * Llama 3.1's template the answer's decode-filled blocks are hit on the next turn; with Qwen3's under
 * {@code enable_thinking=false} none are, because the history drops the generation prompt's empty think block.
 */
class ChatModelAnswersTest {

  private static final int BLOCK = 16;
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String SPEC = "multi-turn:format=chat,answers=model,sessions=30,rate=3,turns=3..5,think=1,"
      + "system=100,user=20..40,output=40..60,seed=7";

  @Test
  void llamaHitsItsOwnAnswerOnTheNextTurnAndTheClientResendsTheText() throws Exception {
    VirtualSetup setup = VirtualSetup.defaults().withWorkers(4).withNumGpuBlocks(8192);
    try (ChatFront chat = ChatFront.load(setup.model(), Fixtures.tokenizer("llama3_1"), BLOCK, null)) {
      Workload w = WorkloadCatalog.create(SPEC);
      ChatAnswers answers = chat.encoder().chatAnswers(w.tokenSpace());
      assertThat(answers.endOfTurn()).as("<|eot_id|>").isEqualTo(128009);
      VirtualOutcome o = VirtualRun.run(w, "kv_aware", setup, chat);
      Map<String, RequestRecord> byId = byId(o);
      int later = 0;
      int sameWorker = 0;
      for (WorkloadRequest r : w.requests()) {
        RequestRecord cur = byId.get(r.id());
        assertThat(cur.error()).as(r.id()).isNull();
        // the model emitted the answer text's tokens, its end of turn cut by max_tokens (the answer's words)
        assertThat(cur.completionTokens()).as(r.id()).isEqualTo(r.outputTokens())
            .isEqualTo(r.generated(answers.tokens(r.answer())).length);
        if (r.after() == null) {
          continue;
        }
        later++;
        WorkloadRequest p = byIdRequest(w, r.after());
        // the client resends the text it received as the assistant message
        JsonNode messages = JSON.readTree(RequestBodies.body(w, r, setup.model())).get("messages");
        assertThat(assistantContents(messages)).contains(answers.text(p.answer()));
        RequestRecord prev = byId.get(r.after());
        assertThat(cur.sentMicros()).isGreaterThanOrEqualTo(prev.sentMicros() + prev.e2eMicros());
        if (!cur.servedBy().equals(prev.servedBy())) {
          continue;
        }
        sameWorker++;
        int computed = (prev.promptTokens() + prev.completionTokens() - 1) / BLOCK * BLOCK;
        assertThat(computed).isGreaterThan(prev.promptTokens() / BLOCK * BLOCK);
        assertThat(cur.cachedTokens()).as(r.id()).isGreaterThanOrEqualTo(computed);
      }
      assertThat(later).isGreaterThan(60);
      assertThat(sameWorker).isGreaterThan(later * 3 / 4);
      // an answer whose text takes more tokens than its words (a first word Llama's tokenizer splits) loses its last
      // word to max_tokens, as vLLM would cut it, and the client resends the words it received
      long cutAnswers = w.requests().stream().filter(r -> w.requests().stream()
          .anyMatch(n -> r.id().equals(n.after())) && answers.tokens(r.answer()).length - 1 > r.outputTokens())
          .count();
      assertThat(o.data().sessions().answersResentShort()).isEqualTo(cutAnswers).isLessThan(later / 10);
      AnswerReuse a = AnswerReuse.compute(w.requests(), chat.engineIds(w, setup.model()),
          r -> r.generated(answers.tokens(r.answer())), BLOCK, r -> byId.get(r.id()).cachedTokens());
      assertThat(a.keptShare()).isEqualTo(1.0);
      assertThat(a.noDivergence()).isEqualTo(a.turns());
      assertThat(a.servedBlocks()).isPositive();
    }
  }

  @Test
  void qwen3WithoutThinkingNeverHitsTheAnswerBecauseTheHistoryDropsTheEmptyThinkBlock() throws Exception {
    VirtualSetup setup = VirtualSetup.defaults().withPreset(Presets.QWEN3_8B_H100).withWorkers(4)
        .withNumGpuBlocks(8192);
    try (ChatFront chat = ChatFront.load(setup.model(), Fixtures.tokenizer("qwen3"), BLOCK, null)) {
      Workload w = WorkloadCatalog.create(SPEC + ",enable_thinking=false");
      ChatAnswers answers = chat.encoder().chatAnswers(w.tokenSpace());
      VirtualOutcome o = VirtualRun.run(w, "kv_aware", setup, chat);
      Map<String, RequestRecord> byId = byId(o);
      int sameWorker = 0;
      for (WorkloadRequest r : w.requests()) {
        RequestRecord cur = byId.get(r.id());
        assertThat(cur.error()).isNull();
        assertThat(cur.completionTokens()).isEqualTo(r.outputTokens());
        RequestRecord prev = r.after() == null ? null : byId.get(r.after());
        if (prev == null || !cur.servedBy().equals(prev.servedBy())) {
          continue;
        }
        sameWorker++;
        // "<think>\n\n</think>\n\n" closes the previous prompt and is gone from the history: nothing from its
        // block on matches
        assertThat(cur.cachedTokens()).as(r.id()).isLessThanOrEqualTo((prev.promptTokens() - 4) / BLOCK * BLOCK);
      }
      assertThat(sameWorker).isGreaterThan(40);
      AnswerReuse a = AnswerReuse.compute(w.requests(), chat.engineIds(w, setup.model()),
          r -> r.generated(answers.tokens(r.answer())), BLOCK, r -> byId.get(r.id()).cachedTokens());
      assertThat(a.keptBlocks()).isZero();
      assertThat(a.servedBlocks()).isZero();
      assertThat(a.divergenceMin()).isEqualTo(-4);
      assertThat(a.divergenceMax()).isEqualTo(-4);
    }
  }

  @Test
  void aChatAnswerCutShortIsCountedAndResentAsTheWordsTheClientReceived() throws Exception {
    // a context of 450 tokens: later turns outgrow it (refused: nothing received) or stop mid-answer
    VirtualSetup setup = VirtualSetup.defaults().withWorkers(4).withNumGpuBlocks(8192).withMaxModelLen(450);
    try (ChatFront chat = ChatFront.load(setup.model(), Fixtures.tokenizer("llama3_1"), BLOCK, null)) {
      Workload w = WorkloadCatalog.create("multi-turn:format=chat,answers=model,sessions=30,rate=2,turns=4..6,"
          + "think=1,system=100,user=20..40,output=40..60,seed=11");
      ChatAnswers answers = chat.encoder().chatAnswers(w.tokenSpace());
      VirtualOutcome o = VirtualRun.run(w, "kv_aware", setup, chat);
      Map<String, RequestRecord> byId = byId(o);
      Map<Long, Integer> received = new HashMap<>();
      int servedChecked = 0;
      java.util.Set<String> resent = new java.util.HashSet<>();
      w.requests().forEach(r -> resent.add(r.after()));
      for (WorkloadRequest r : w.requests()) {
        RequestRecord cur = byId.get(r.id());
        if (r.after() != null && cur.promptTokens() >= 0) {
          // the engine prefilled the history as the client holds it
          byte[] body = RequestBodies.body(w, r, r.prompt().withAnswersCut(received), setup.model());
          int[] expected = chat.encoder().tokens(chat.preparer().prepare(
              dev.kvrouter.extproc.request.InferenceRequest.Kind.CHAT, body, body.length, null).request());
          assertThat(cur.promptTokens()).as(r.id()).isEqualTo(expected.length);
          servedChecked++;
        }
        int got = Math.max(0, cur.contentChunks());
        // a last turn's answer is never resent, so it is not counted as resent short
        if (resent.contains(r.id()) && got < answers.tokens(r.answer()).length - 1) {
          received.put(r.answer().seed(), answers.wordsReceived(r.answer(), got));
        }
      }
      assertThat(servedChecked).isPositive();
      assertThat(o.data().sessions().answersResentShort()).isPositive().isEqualTo(received.size());
      assertThat(o.ledger().zero()).isTrue();

      // what a cut answer is resent as: the words received, the text's prefix
      WorkloadRequest second = w.requests().stream().filter(x -> x.after() != null).findFirst().orElseThrow();
      WorkloadRequest first = byIdRequest(w, second.after());
      JsonNode cut = JSON.readTree(RequestBodies.body(w, second,
          second.prompt().withAnswersCut(Map.of(first.answer().seed(), 5)), setup.model())).get("messages");
      assertThat(assistantContents(cut)).containsExactly(answers.text(
          new dev.kvrouter.examples.workload.Segment(first.answer().seed(), 5)));
      assertThat(answers.text(first.answer())).startsWith(assistantContents(cut).get(0) + " ");
    }
  }

  private static java.util.List<String> assistantContents(JsonNode messages) {
    java.util.List<String> out = new java.util.ArrayList<>();
    for (JsonNode m : messages) {
      if (m.get("role").asText().equals("assistant")) {
        out.add(m.get("content").asText());
      }
    }
    return out;
  }

  private static WorkloadRequest byIdRequest(Workload w, String id) {
    return w.requests().stream().filter(x -> x.id().equals(id)).findFirst().orElseThrow();
  }

  private static Map<String, RequestRecord> byId(VirtualOutcome o) {
    Map<String, RequestRecord> m = new HashMap<>();
    for (RequestRecord r : o.data().requests()) {
      m.put(r.requestId(), r);
    }
    return m;
  }
}
