package dev.kvrouter.examples.workload;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The ideal reuse of conversations that resend the model's own answer: an earlier turn's answer blocks count as
 * seen, as the engine caches them (full blocks of prompt + output minus the last token, whose KV is never computed).
 */
class IdealReuseAnswersTest {

  private static final TokenSpace SPACE = TokenSpace.DEFAULT;

  /** Turn 0 asks {@code a} and gets {@code answer}; turn 1 resends {@code a + answer} and asks {@code c}. */
  private static List<WorkloadRequest> twoTurns(int a, int answer, int c, boolean scripted) {
    Segment first = new Segment(101, a);
    Segment reply = new Segment(202, answer);
    Segment second = new Segment(303, c);
    return List.of(
        new WorkloadRequest(0, "t0", 0, "s", Prompt.tokens(List.of(first)), answer, scripted ? reply : null, null),
        new WorkloadRequest(1, "t1", 1, "s", Prompt.tokens(List.of(first, reply, second)), 1, null,
            scripted ? "t0" : null));
  }

  private static IdealReuse ideal(List<WorkloadRequest> reqs) {
    Workload w = new Workload("test", java.util.Map.of(), SPACE, reqs);
    return w.idealReuse(16);
  }

  @Test
  void anEarlierAnswerIsCachedUpToItsLastTokenAndTheNextTurnHitsIt() {
    // 20 + 30 = 50 tokens; the engine computes 49 of them: 3 full blocks of 16 cached. Turn 1 (60 tokens) starts
    // with those 48 tokens and may hit at most (60 - 1) / 16 = 3 blocks.
    IdealReuse model = ideal(twoTurns(20, 30, 10, true));
    assertThat(model.reusedBlocks()).isEqualTo(3);
    assertThat(model.cacheableHitTokens()).isEqualTo(48);
    assertThat(model.fullBlocks()).as("prompt blocks only: 1 + 3").isEqualTo(4);
    assertThat(model.uniqueBlocks()).as("turn 0's prompt and answer fill 3 blocks; turn 1's 3 full blocks are those")
        .isEqualTo(3);
    // without a scripted answer nobody generated those tokens: only turn 0's one full prompt block is seen
    IdealReuse fresh = ideal(twoTurns(20, 30, 10, false));
    assertThat(fresh.reusedBlocks()).isEqualTo(1);
    assertThat(fresh.cacheableHitTokens()).isEqualTo(16);
  }

  @Test
  void aChatStandInResendsTheAnswerTheEngineCachedAsTokenPromptsDo() {
    // without a tokenizer a chat prompt is its marker stand-in: it must end with the assistant marker (a template's
    // generation prompt) and the answer with the end marker (the model's end of turn), else the cached answer sits
    // where the next turn has the marker and none of its blocks ever matches
    String base = "multi-turn:sessions=40,turns=4..6,system=64,user=20..40,output=64..96,seed=3,answers=model,"
        + "loop=closed";
    Workload tokens = WorkloadCatalog.create(base + ",format=tokens");
    Workload chat = WorkloadCatalog.create(base + ",format=chat");
    AnswerReuse at = AnswerReuse.compute(tokens.requests(), tokens::promptIds, tokens::answerTokens, 16, null);
    AnswerReuse ac = AnswerReuse.compute(chat.requests(), chat::promptIds, chat::answerTokens, 16, null);
    // every answer block comes back, as with token prompts (block counts differ: the markers shift boundaries)
    assertThat(at.keptBlocks()).isEqualTo(at.answerBlocks());
    assertThat(ac.keptBlocks()).isPositive().isEqualTo(ac.answerBlocks());
    // prompt + answer (its last token, the end marker, included) is a prefix of the next turn
    WorkloadRequest t1 = chat.requests().stream().filter(r -> r.after() != null).findFirst().orElseThrow();
    WorkloadRequest t0 = chat.requests().stream().filter(r -> r.id().equals(t1.after())).findFirst().orElseThrow();
    int[] p0 = chat.promptTokens(t0);
    int[] a0 = chat.answerTokens(t0);
    int[] p1 = chat.promptTokens(t1);
    assertThat(java.util.Arrays.copyOfRange(p1, 0, p0.length)).containsExactly(p0);
    assertThat(java.util.Arrays.copyOfRange(p1, p0.length, p0.length + a0.length)).containsExactly(a0);
  }

  @Test
  void theLastGeneratedTokenIsNeverCached() {
    // 18 + 30 = 48 tokens exactly, but the last one has no KV: 47 computed tokens fill 2 blocks, not 3
    IdealReuse model = ideal(twoTurns(18, 30, 10, true));
    assertThat(model.reusedBlocks()).isEqualTo(2);
    // one token more in the answer and the third block is full of computed tokens
    assertThat(ideal(twoTurns(18, 31, 10, true)).reusedBlocks()).isEqualTo(3);
  }

  @Test
  void aMultiTurnWorkloadWithModelAnswersOffersMoreThanTheSamePromptsWithFreshOnes() {
    String spec = "multi-turn:format=tokens,sessions=30,turns=3..5,system=64,user=20..40,output=40..60,seed=5";
    Workload model = WorkloadCatalog.create(spec);
    Workload fresh = WorkloadCatalog.create(spec + ",answers=fresh");
    assertThat(model.params()).containsEntry("answers", "model").containsEntry("loop", "closed");
    assertThat(fresh.params()).containsEntry("answers", "fresh").containsEntry("loop", "open");
    // the same prompts: only whether the engine's answer matches them differs
    for (int i = 0; i < model.size(); i++) {
      assertThat(fresh.promptTokens(fresh.requests().get(i))).isEqualTo(model.promptTokens(model.requests().get(i)));
    }
    IdealReuse m = model.idealReuse(16);
    IdealReuse f = fresh.idealReuse(16);
    assertThat(m.promptTokens()).isEqualTo(f.promptTokens());
    // every later turn resends a 40+ token answer: at least two more blocks hit per later turn
    long laterTurns = model.requests().stream().filter(r -> r.after() != null).count();
    assertThat(laterTurns).isGreaterThan(60);
    assertThat(m.reusedBlocks() - f.reusedBlocks()).isGreaterThanOrEqualTo(2 * laterTurns);
  }
}
