package dev.kvrouter.examples.ab;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.workload.IdealReuse;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Conversations that resend the model's own answer, closed loop per session: the engine that served turn k holds
 * prompt k + answer k when turn k+1 arrives, and reports those blocks as cached; no turn leaves before the previous
 * one finished; {@code answers=fresh} keeps the old open-loop behaviour with answers no engine generated.
 */
class MultiTurnAnswersTest {

  private static final int BLOCK = 16;
  private static final VirtualSetup SETUP = VirtualSetup.defaults().withWorkers(4).withNumGpuBlocks(8192);
  /** Answers of 40-60 tokens: every answer ends at least two blocks past its prompt's last full block. */
  private static final String SPEC = "multi-turn:format=tokens,sessions=40,rate=4,turns=3..5,think=1,system=100,"
      + "user=20..40,output=40..60,seed=7";

  @Test
  void kvAwareLaterTurnsFindThePreviousAnswerCachedOnTheWorkerThatWroteIt() {
    assertThat(SETUP.blockSize()).isEqualTo(BLOCK);
    Workload w = WorkloadCatalog.create(SPEC);
    VirtualOutcome o = VirtualRun.run(w, "kv_aware", SETUP, null);
    Map<String, RequestRecord> byId = byId(o);
    int later = 0;
    int sameWorker = 0;
    for (WorkloadRequest r : w.requests()) {
      if (r.after() == null) {
        continue;
      }
      later++;
      RequestRecord prev = byId.get(r.after());
      RequestRecord cur = byId.get(r.id());
      assertThat(prev.error()).isNull();
      assertThat(cur.error()).isNull();
      if (!cur.servedBy().equals(prev.servedBy())) {
        continue;
      }
      sameWorker++;
      // the engine computed prompt + answer minus its last token and cached the full blocks
      int answerBlocks = (prev.promptTokens() + prev.completionTokens() - 1) / BLOCK;
      assertThat(cur.cachedTokens()).as(r.id()).isGreaterThanOrEqualTo(answerBlocks * BLOCK);
      assertThat(answerBlocks * BLOCK).as("the answer reaches past the previous prompt's full blocks")
          .isGreaterThan(prev.promptTokens() / BLOCK * BLOCK);
    }
    assertThat(later).isGreaterThan(80);
    assertThat(sameWorker).as("kv_aware keeps a conversation where its KV is").isGreaterThan(later * 3 / 4);
    assertThat(o.data().sessions().modelAnswers()).isTrue();
    assertThat(o.data().sessions().dependentTurns()).isEqualTo(later);
    assertThat(o.data().sessions().answersResentShort()).isZero();
    assertThat(o.ledger().zero()).isTrue();
  }

  @Test
  void freshAnswersAreNeverFoundInTheCache() {
    Workload w = WorkloadCatalog.create(SPEC + ",answers=fresh");
    VirtualOutcome o = VirtualRun.run(w, "kv_aware", SETUP, null);
    Map<String, RequestRecord> byId = byId(o);
    List<WorkloadRequest> reqs = w.requests();
    int checked = 0;
    for (int i = 0; i < reqs.size(); i++) {
      WorkloadRequest r = reqs.get(i);
      String[] part = r.id().split("-");
      int turn = Integer.parseInt(part[part.length - 1]);
      assertThat(r.after()).isNull();
      assertThat(r.answer()).isNull();
      if (turn == 0) {
        continue;
      }
      String prevId = r.id().substring(0, r.id().lastIndexOf('-') + 1) + (turn - 1);
      RequestRecord prev = byId.get(prevId);
      RequestRecord cur = byId.get(r.id());
      // the previous prompt's last partial block was completed by tokens the next prompt does not contain
      assertThat(cur.cachedTokens()).as(r.id()).isLessThanOrEqualTo(prev.promptTokens() / BLOCK * BLOCK);
      checked++;
    }
    assertThat(checked).isGreaterThan(80);
    assertThat(o.data().sessions()).as("an open-loop run has no closed-loop figures").isNull();
  }

  @Test
  void theEngineServesExactlyWhatTheIdealSingleCacheSaysWhenNothingOverlaps() {
    // one worker with room for everything and sessions far apart: the engine's own cached_tokens is the ideal,
    // answer blocks included
    Workload w = WorkloadCatalog.create("multi-turn:format=tokens,sessions=12,rate=0.2,turns=3..5,think=3,"
        + "system=100,user=20..40,output=40..60,seed=9");
    VirtualOutcome o = VirtualRun.run(w, "kv_aware", SETUP.withWorkers(1), null);
    IdealReuse ideal = w.idealReuse(BLOCK);
    long cached = o.data().requests().stream().mapToLong(RequestRecord::cachedTokens).sum();
    long prompt = o.data().requests().stream().mapToLong(RequestRecord::promptTokens).sum();
    assertThat(prompt).isEqualTo(ideal.promptTokens());
    assertThat(cached).isEqualTo(ideal.cacheableHitTokens());
    assertThat(cached).isGreaterThan(WorkloadCatalog.create("multi-turn:format=tokens,sessions=12,rate=0.2,"
        + "turns=3..5,think=3,system=100,user=20..40,output=40..60,seed=9,answers=fresh").idealReuse(BLOCK)
        .cacheableHitTokens());
  }

  @Test
  void noTurnLeavesBeforeThePreviousTurnOfItsSessionFinished() {
    // think time far below the latency of a turn: most turns are due while their predecessor is still running
    String tight = "multi-turn:format=tokens,sessions=40,rate=8,turns=3..5,think=0.005,system=100,user=20..40,"
        + "output=40..60,seed=7";
    Workload w = WorkloadCatalog.create(tight);
    for (String policy : List.of("kv_aware", "cache_only")) {
      VirtualOutcome o = VirtualRun.run(w, policy, SETUP, null);
      Map<String, RequestRecord> byId = byId(o);
      long held = 0;
      double heldSeconds = 0;
      for (WorkloadRequest r : w.requests()) {
        RequestRecord cur = byId.get(r.id());
        assertThat(cur.sentMicros()).isGreaterThanOrEqualTo(r.arrivalMicros());
        if (r.after() == null) {
          assertThat(cur.sentMicros()).isEqualTo(r.arrivalMicros());
          continue;
        }
        RequestRecord prev = byId.get(r.after());
        long prevDone = prev.sentMicros() + prev.e2eMicros();
        assertThat(cur.sentMicros()).as(policy + " " + r.id()).isGreaterThanOrEqualTo(prevDone);
        if (cur.sentMicros() > r.arrivalMicros()) {
          held++;
          heldSeconds += (cur.sentMicros() - r.arrivalMicros()) / 1e6;
          // held back: sent the instant the answer completed, not later
          assertThat(cur.sentMicros()).isLessThanOrEqualTo(prevDone + 1);
        }
      }
      assertThat(held).as(policy).isPositive().isEqualTo(o.data().sessions().heldBack());
      assertThat(o.data().sessions().heldBackSeconds())
          .isCloseTo(heldSeconds, org.assertj.core.data.Offset.offset(0.01));
    }
    // the same workload open loop sends turns while their predecessor still streams
    Workload open = WorkloadCatalog.create(tight + ",answers=fresh");
    VirtualOutcome o = VirtualRun.run(open, "kv_aware", SETUP, null);
    Map<String, RequestRecord> byId = byId(o);
    long early = 0;
    for (WorkloadRequest r : open.requests()) {
      assertThat(byId.get(r.id()).sentMicros()).isEqualTo(r.arrivalMicros());
      String[] part = r.id().split("-");
      int turn = Integer.parseInt(part[part.length - 1]);
      if (turn > 0) {
        RequestRecord prev = byId.get(r.id().substring(0, r.id().lastIndexOf('-') + 1) + (turn - 1));
        early += byId.get(r.id()).sentMicros() < prev.sentMicros() + prev.e2eMicros() ? 1 : 0;
      }
    }
    assertThat(early).isPositive();
  }

  @Test
  void aTurnCutShortIsResentAsTheClientReceivedIt() {
    // a context of 400 tokens: later turns outgrow it and are refused (400), the answer of a turn that reaches
    // the limit is cut short; the next turn must carry only what was streamed, or the worker would see a history
    // its model never produced
    VirtualSetup small = SETUP.withMaxModelLen(400);
    Workload w = WorkloadCatalog.create("multi-turn:format=tokens,sessions=30,rate=2,turns=4..6,think=1,"
        + "system=100,user=20..40,output=40..60,seed=11");
    VirtualOutcome o = VirtualRun.run(w, "kv_aware", small, null);
    Map<String, RequestRecord> byId = byId(o);
    long cut = 0;
    // what each turn's prompt must have been: the previous one as sent, what the client received of its answer
    // (nothing for a refused turn), the new user message
    Map<String, Integer> sent = new HashMap<>();
    for (WorkloadRequest r : w.requests()) {
      RequestRecord cur = byId.get(r.id());
      int expected;
      if (r.after() == null) {
        expected = w.promptTokens(r).length;
      } else {
        WorkloadRequest p = w.requests().get(indexOf(w, r.after()));
        RequestRecord prev = byId.get(r.after());
        int received = Math.max(0, prev.completionTokens());
        int user = w.promptTokens(r).length - w.promptTokens(p).length - p.answer().length();
        expected = sent.get(p.id()) + received + user;
        if (received < p.answer().length()) {
          cut++;
        }
      }
      sent.put(r.id(), expected);
      if (cur.promptTokens() >= 0) {
        assertThat(cur.promptTokens()).as(r.id()).isEqualTo(expected);
      }
    }
    assertThat(cut).isPositive();
    assertThat(o.data().sessions().answersResentShort()).isPositive();
    assertThat(o.ledger().zero()).isTrue();
  }

  private static int indexOf(Workload w, String id) {
    return w.requests().stream().filter(x -> x.id().equals(id)).findFirst().orElseThrow().index();
  }

  private static Map<String, RequestRecord> byId(VirtualOutcome o) {
    Map<String, RequestRecord> m = new HashMap<>();
    for (RequestRecord r : o.data().requests()) {
      m.put(r.requestId(), r);
    }
    return m;
  }
}
