package dev.kvrouter.examples.sim.engine;

import static dev.kvrouter.examples.sim.testing.Tokens.concat;
import static dev.kvrouter.examples.sim.testing.Tokens.seq;
import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.wire.AllBlocksCleared;
import dev.kvrouter.index.wire.BlockRemoved;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.KvEvent;
import dev.kvrouter.examples.sim.testing.RecordingObserver;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** vLLM v1 scheduling: token budget, chunked prefill, decode first, max_num_seqs, preemption by recompute. */
class SchedulerTest {

  private final Map<String, RecordingObserver> observers = new HashMap<>();
  private long now;

  private static EngineConfig.Builder config() {
    return EngineConfig.builder("m").blockSize(4).numGpuBlocks(257).maxNumBatchedTokens(32).maxNumSeqs(8)
        .maxModelLen(1024);
  }

  private RecordingObserver add(EngineCore core, String id, int[] prompt, int maxTokens) {
    RecordingObserver o = new RecordingObserver();
    observers.put(id, o);
    assertThat(core.add(new RequestSpec(id, prompt, maxTokens, null, null, id.hashCode()), o, now)).isTrue();
    return o;
  }

  /** One engine step; returns what was scheduled, as request id -> tokens. */
  private Map<String, Integer> step(EngineCore core) {
    ScheduledStep s = core.schedule();
    Map<String, Integer> out = new java.util.LinkedHashMap<>();
    for (int i = 0; i < s.size(); i++) {
      out.put(s.requestId(i), s.newTokens(i));
    }
    now += 1_000_000;
    core.complete(s, 1_000_000, now);
    core.checkInvariants();
    return out;
  }

  private static EngineCore core(EngineConfig c) {
    return EngineCore.create(c, 7L, OutputTokens.range(100, 50));
  }

  @Test
  void chunkedPrefillSplitsALongPromptAcrossStepsAndSamplesOnlyAfterTheLastChunk() {
    EngineCore core = core(config().build());
    RecordingObserver o = add(core, "a", seq(100, 1), 3);
    assertThat(step(core)).containsExactly(Map.entry("a", 32));
    assertThat(step(core)).containsExactly(Map.entry("a", 32));
    assertThat(step(core)).containsExactly(Map.entry("a", 32));
    assertThat(o.tokens).isEmpty();
    assertThat(step(core)).containsExactly(Map.entry("a", 4));
    assertThat(o.tokens).hasSize(1);
    assertThat(step(core)).containsExactly(Map.entry("a", 1));
    assertThat(step(core)).containsExactly(Map.entry("a", 1));
    assertThat(o.outcome).isNotNull();
    assertThat(o.outcome.completionTokens()).isEqualTo(3);
    assertThat(o.tokens).hasSize(3);
    assertThat(core.hasWork()).isFalse();
  }

  @Test
  void blocksAreStoredChunkByChunkAsTheyFill() {
    EngineCore core = core(config().build());
    add(core, "a", seq(40, 1), 1);
    core.schedule(); // 32 tokens = 8 full blocks
    List<KvEvent> first = core.takeEvents();
    assertThat(((BlockStored) first.get(0)).blockHashes()).hasSize(8);
  }

  @Test
  void tokenBudgetIsNeverExceeded() {
    EngineCore core = core(config().maxNumSeqs(64).build());
    for (int i = 0; i < 20; i++) {
      add(core, "r" + i, seq(10 + i * 3, i * 1000), 5);
    }
    for (int s = 0; s < 200 && core.hasWork(); s++) {
      int total = step(core).values().stream().mapToInt(Integer::intValue).sum();
      assertThat(total).isLessThanOrEqualTo(32);
    }
    assertThat(core.hasWork()).isFalse();
    assertThat(observers.values()).allSatisfy(o -> assertThat(o.outcome).isNotNull());
  }

  @Test
  void runningDecodesAreScheduledBeforeANewPrefill() {
    EngineCore core = core(config().build());
    add(core, "a", seq(8, 1), 10);
    add(core, "b", seq(8, 500), 10);
    step(core); // both prefill
    add(core, "c", seq(200, 9000), 1);
    Map<String, Integer> s = step(core);
    assertThat(new ArrayList<>(s.keySet())).containsExactly("a", "b", "c");
    assertThat(s).containsEntry("a", 1).containsEntry("b", 1).containsEntry("c", 30);
    // and while c is mid-prefill, the decodes keep their token every step
    for (int i = 0; i < 3; i++) {
      Map<String, Integer> next = step(core);
      assertThat(next).containsEntry("a", 1).containsEntry("b", 1);
    }
  }

  @Test
  void maxNumSeqsBoundsTheRunningSet() {
    EngineCore core = core(config().maxNumSeqs(2).build());
    add(core, "a", seq(4, 1), 3);
    add(core, "b", seq(4, 100), 3);
    RecordingObserver c = add(core, "c", seq(4, 200), 3);
    assertThat(step(core).keySet()).containsExactly("a", "b");
    assertThat(core.numWaiting()).isEqualTo(1);
    step(core);
    step(core); // a and b finish here
    assertThat(c.tokens).isEmpty();
    assertThat(step(core).keySet()).containsExactly("c");
  }

  @Test
  void withoutChunkedPrefillAPromptWaitsForAStepWithRoomForAllOfIt() {
    EngineCore core = core(config().enableChunkedPrefill(false).maxNumBatchedTokens(1024).numGpuBlocks(400)
        .build());
    add(core, "a", seq(1000, 1), 2);
    add(core, "b", seq(100, 5000), 2);
    assertThat(step(core)).containsExactly(Map.entry("a", 1000));
    assertThat(step(core)).containsExactly(Map.entry("a", 1), Map.entry("b", 100));
  }

  @Test
  void longPrefillThresholdCapsEachChunk() {
    EngineCore core = core(config().longPrefillTokenThreshold(10).build());
    add(core, "a", seq(25, 1), 1);
    add(core, "b", seq(25, 700), 1);
    assertThat(step(core)).containsExactly(Map.entry("a", 10), Map.entry("b", 10));
  }

  @Test
  void repeatedPromptReportsCachedTokensAndComputesOnlyTheRest() {
    EngineCore core = core(config().build());
    int[] prompt = seq(30, 1);
    RecordingObserver a = add(core, "a", prompt, 1);
    while (core.hasWork()) {
      step(core);
    }
    RecordingObserver b = add(core, "b", prompt, 1);
    assertThat(step(core)).containsExactly(Map.entry("b", 2)); // 28 tokens (7 blocks) cached, 2 computed
    assertThat(a.outcome.cachedTokens()).isZero();
    assertThat(b.outcome.cachedTokens()).isEqualTo(28);
    assertThat(b.cachedTokensAtFirstToken).isEqualTo(28);
    EngineStats st = core.stats();
    assertThat(st.promptTokens()).isEqualTo(60);
    assertThat(st.cachedPromptTokens()).isEqualTo(28);
    assertThat(st.prefixQueryTokens()).isEqualTo(60);
    assertThat(st.prefixHitTokens()).isEqualTo(28);
    assertThat(st.prefillTokensComputed()).isEqualTo(32);
  }

  @Test
  void sameRequestProducesTheSameOutputTokens() {
    EngineCore core = core(config().build());
    RecordingObserver a = add(core, "a", seq(9, 1), 6);
    while (core.hasWork()) {
      step(core);
    }
    EngineCore other = EngineCore.create(config().build(), 99L, OutputTokens.range(100, 50));
    RecordingObserver o = new RecordingObserver();
    other.add(new RequestSpec("x", seq(9, 1), 6, null, null, "a".hashCode()), o, 0);
    while (other.hasWork()) {
      ScheduledStep s = other.schedule();
      other.complete(s, 1, 1);
    }
    assertThat(o.tokens).isEqualTo(a.tokens);
  }

  @Test
  void whenBlocksRunOutTheLatestRunningRequestIsPreemptedAndRecomputedLater() {
    // 12 usable blocks of 4 tokens. Two requests of 16-token prompts generating 16 tokens each need
    // 8 blocks each at the end: they cannot both finish without a preemption.
    EngineCore core = core(config().numGpuBlocks(13).maxNumBatchedTokens(64).build());
    RecordingObserver a = add(core, "a", seq(16, 1), 16);
    RecordingObserver b = add(core, "b", seq(16, 3000), 16);
    int preemptions = 0;
    for (int i = 0; i < 200 && core.hasWork(); i++) {
      ScheduledStep s = core.schedule();
      preemptions += s.preempted();
      now += 1_000_000;
      core.complete(s, 1_000_000, now);
      core.checkInvariants();
      assertThat(core.numRunning()).isLessThanOrEqualTo(2);
    }
    assertThat(preemptions).isPositive();
    assertThat(a.outcome).isNotNull();
    assertThat(b.outcome).isNotNull();
    assertThat(a.outcome.preemptions()).isZero();
    assertThat(b.outcome.preemptions()).isPositive();
    assertThat(b.tokens).hasSize(16);
    EngineStats st = core.stats();
    assertThat(st.preemptions()).isEqualTo(preemptions);
    // b's prompt was computed at least twice (recompute), part of it possibly from its own cached prefix
    assertThat(st.prefillTokensComputed()).isGreaterThan(32);
    assertThat(st.generationTokens()).isEqualTo(32);
  }

  @Test
  void abortFreesBlocksAndTellsTheObserver() {
    EngineCore core = core(config().build());
    RecordingObserver a = add(core, "a", seq(20, 1), 50);
    step(core);
    assertThat(core.abort("a")).isTrue();
    assertThat(a.failure.kind()).isEqualTo(RequestFailure.Kind.ABORTED);
    assertThat(core.hasWork()).isFalse();
    core.checkInvariants();
    assertThat(core.abort("a")).isFalse();
  }

  @Test
  void invalidRequestsAreRefusedWithVllmsMessages() {
    EngineConfig c = config().maxModelLen(64).vocabSize(1000).build();
    assertThat(EngineCore.validate(c, RequestSpec.of("x", seq(60, 1), 10)))
        .isEqualTo("This model's maximum context length is 64 tokens. However, you requested 70 tokens "
            + "(60 in the messages, 10 in the completion).");
    assertThat(EngineCore.validate(c, RequestSpec.of("x", new int[] {1, 5000}, 1))).contains("out of vocabulary");
    assertThat(EngineCore.validate(c, RequestSpec.of("x", new int[0], 1))).contains("empty");
    assertThat(EngineCore.validate(c, new RequestSpec("x", seq(4, 1), 1, "nope", null, 0))).contains("nope");
    assertThat(EngineCore.validate(c, RequestSpec.of("x", seq(4, 1), 1))).isNull();

    EngineCore core = core(c);
    RecordingObserver o = new RecordingObserver();
    assertThat(core.add(RequestSpec.of("x", seq(60, 1), 10), o, 0)).isFalse();
    assertThat(o.failure.kind()).isEqualTo(RequestFailure.Kind.INVALID);
  }

  @Test
  void theWaitingQueueIsBounded() {
    EngineCore core = core(config().maxWaitingRequests(2).build());
    add(core, "a", seq(4, 1), 1);
    add(core, "b", seq(4, 1), 1);
    RecordingObserver c = new RecordingObserver();
    assertThat(core.add(RequestSpec.of("c", seq(4, 1), 1), c, 0)).isFalse();
    assertThat(c.failure.kind()).isEqualTo(RequestFailure.Kind.OVERLOADED);
  }

  @Test
  void decodeBlocksAreCachedSoAFollowUpTurnHitsThePreviousAnswer() {
    EngineCore core = core(config().build());
    RecordingObserver a = add(core, "a", seq(8, 1), 8);
    while (core.hasWork()) {
      step(core);
    }
    int[] answer = a.tokens.stream().mapToInt(Integer::intValue).toArray();
    int[] nextTurn = concat(concat(seq(8, 1), answer), seq(5, 4000));
    RecordingObserver b = add(core, "b", nextTurn, 1);
    while (core.hasWork()) {
      step(core);
    }
    // Prompt (8) and answer (8) are 16 tokens, but the last sampled token is never fed back: 15 tokens were
    // computed, so 3 full blocks (12 tokens) are cached, as in vLLM.
    assertThat(b.outcome.cachedTokens()).isEqualTo(12);
  }
}
