package dev.kvrouter.examples.sim.engine;

import static dev.kvrouter.examples.sim.testing.Tokens.concat;
import static dev.kvrouter.examples.sim.testing.Tokens.seq;
import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.sim.testing.RecordingObserver;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * When the simulated vLLM runs the vision encoder: once per image, in the step whose chunk first reaches the
 * image's positions; not for an image inside the request's prefix-cache hit, nor for one whose output is still in
 * the encoder cache (sized as vLLM's default, one step's token budget).
 */
class VisionEncoderSchedulingTest {

  private long now;

  private static EngineConfig.Builder config() {
    return EngineConfig.builder("m").blockSize(4).numGpuBlocks(1025).maxNumBatchedTokens(32).maxNumSeqs(8)
        .maxModelLen(1024);
  }

  private static EngineCore core(EngineConfig c) {
    return EngineCore.create(c, 7L, OutputTokens.range(100, 50));
  }

  private void add(EngineCore core, String id, int[] prompt, MediaSpan... media) {
    assertThat(core.add(new RequestSpec(id, prompt, 2, null, null, id.hashCode(), List.of(media)),
        new RecordingObserver(), now)).isTrue();
  }

  /** Runs steps until the engine is idle; returns the images encoded in each step. */
  private List<Integer> runAll(EngineCore core) {
    List<Integer> encoded = new ArrayList<>();
    for (int i = 0; i < 200 && core.hasWork(); i++) {
      ScheduledStep s = core.schedule();
      encoded.add(s.work().encodedItems());
      now += 1_000_000;
      core.complete(s, 1_000_000, now);
      core.checkInvariants();
    }
    assertThat(core.hasWork()).isFalse();
    return encoded;
  }

  private static int[] imagePrompt(int imageToken) {
    // 8 text tokens, a 20-token image at [8, 28), 12 text tokens: 40 tokens, chunks of 32
    return concat(seq(8, 1), seq(20, imageToken), seq(12, 500));
  }

  @Test
  void anImageIsEncodedOnceInTheStepThatFirstReachesIt() {
    EngineCore core = core(config().build());
    // the image spans the first chunk's end: encoded in step 1 only, not again when step 2 finishes it
    add(core, "a", imagePrompt(900), new MediaSpan("img-a", 8, 20));
    List<Integer> steps = runAll(core);
    assertThat(steps.get(0)).isEqualTo(1);
    assertThat(steps.subList(1, steps.size())).containsOnly(0);
    assertThat(core.stats().media()).isEqualTo(new EngineStats.Media(1, 0, 0));
  }

  @Test
  void anImageReachedOnlyByALaterChunkIsEncodedThen() {
    EngineCore core = core(config().build());
    int[] prompt = concat(seq(40, 1), seq(20, 900), seq(4, 500));
    add(core, "a", prompt, new MediaSpan("img-a", 40, 20));
    List<Integer> steps = runAll(core);
    assertThat(steps.subList(0, 2)).containsExactly(0, 1);
  }

  @Test
  void withChunkedMmInputDisabledAChunkStopsBeforeAnImageItWouldSplit() {
    int[] prompt = concat(seq(20, 1), seq(20, 900), seq(12, 500)); // image at [20, 40), chunks of 32
    MediaSpan image = new MediaSpan("img-a", 20, 20);
    EngineCore split = core(config().build());
    add(split, "a", prompt, image);
    assertThat(split.schedule().newTokens(0)).as("vLLM's default: the chunk ends inside the image").isEqualTo(32);

    EngineCore gemma = core(config().disableChunkedMmInput(true).build());
    add(gemma, "a", prompt, image);
    ScheduledStep first = gemma.schedule();
    assertThat(first.newTokens(0)).as("cut back to the image's start").isEqualTo(20);
    assertThat(first.work().encodedItems()).isZero();
    now += 1_000_000;
    gemma.complete(first, 1_000_000, now);
    ScheduledStep second = gemma.schedule();
    assertThat(second.newTokens(0)).isEqualTo(32);
    assertThat(second.work().encodedItems()).isEqualTo(1);
  }

  @Test
  void aPrefixHitEndingInsideAnImageRunsTheEncoderWithoutRollingBack() {
    EngineCore core = core(config().disableChunkedMmInput(true).build());
    int[] prompt = concat(seq(8, 1), seq(20, 900), seq(12, 500)); // image at [8, 28)
    add(core, "a", prompt, new MediaSpan("img-a", 8, 20));
    runAll(core);
    // the same prompt up to token 26, inside the image, then other text: blocks [0, 24) are a hit, the image ends
    // at 28, so the hit ends inside it
    int[] cut = java.util.Arrays.copyOf(prompt, 26);
    add(core, "b", concat(cut, seq(30, 700)), new MediaSpan("img-a", 8, 20));
    ScheduledStep s = core.schedule();
    assertThat(s.newTokens(0)).as("starts at the hit (24), inside the image").isEqualTo(32);
    assertThat(core.stats().media().encoderCacheHits()).as("its output is still cached").isEqualTo(1);
  }

  @Test
  void anImageInsideThePrefixHitIsNotEncodedAgain() {
    EngineCore core = core(config().build());
    add(core, "a", imagePrompt(900), new MediaSpan("img-a", 8, 20));
    runAll(core);
    // same text and image, longer question: the image's blocks are a prefix hit
    int[] longer = concat(imagePrompt(900), seq(8, 700));
    add(core, "b", longer, new MediaSpan("img-a", 8, 20));
    assertThat(runAll(core)).containsOnly(0);
    assertThat(core.stats().media()).isEqualTo(new EngineStats.Media(1, 1, 0));
  }

  @Test
  void theSameImageBehindAnotherPrefixComesFromTheEncoderCache() {
    EngineCore core = core(config().build());
    add(core, "a", imagePrompt(900), new MediaSpan("img-a", 8, 20));
    runAll(core);
    // different leading text: no prefix hit reaches the image, but its encoder output is still cached
    int[] other = concat(seq(8, 300), seq(20, 900), seq(12, 500));
    add(core, "b", other, new MediaSpan("img-a", 8, 20));
    assertThat(runAll(core)).containsOnly(0);
    assertThat(core.stats().media()).isEqualTo(new EngineStats.Media(1, 0, 1));
  }

  @Test
  void theEncoderCacheKeepsOneStepsBudgetAndEvictsTheLeastRecentlyUsed() {
    EngineCore core = core(config().build()); // 32 tokens of encoder cache: one 20-token image
    add(core, "a", imagePrompt(900), new MediaSpan("img-a", 8, 20));
    runAll(core);
    add(core, "b", concat(seq(8, 300), seq(20, 901), seq(12, 500)), new MediaSpan("img-b", 8, 20));
    runAll(core);
    // img-a was evicted to make room for img-b; behind a new prefix it is encoded again
    add(core, "c", concat(seq(8, 400), seq(20, 900), seq(12, 500)), new MediaSpan("img-a", 8, 20));
    runAll(core);
    assertThat(core.stats().media()).isEqualTo(new EngineStats.Media(3, 0, 0));
  }

  @Test
  void aPreemptedRequestDoesNotEncodeTwiceWhileItsOutputIsCached() {
    // 12 usable blocks of 4 tokens: two 24-token prompts fill them in one step; the first decode needs a block,
    // so the later request is preempted and recomputes its prompt, image included
    EngineCore core = core(config().numGpuBlocks(13).maxNumBatchedTokens(64).build());
    for (String id : List.of("a", "b")) {
      int image = id.equals("a") ? 900 : 901;
      assertThat(core.add(new RequestSpec(id, concat(seq(4, 300), seq(20, image)), 20, null, null, id.hashCode(),
          List.of(new MediaSpan("img-" + id, 4, 20))), new RecordingObserver(), now)).isTrue();
    }
    runAll(core);
    EngineStats s = core.stats();
    assertThat(s.preemptions()).isPositive();
    assertThat(s.media().encoderRuns()).isEqualTo(2);
    assertThat(s.media().encoderRuns() + s.media().encoderCacheHits() + s.media().skippedByPrefix())
        .as("every time a chunk first reaches an image is counted once")
        .isEqualTo(2 + s.preemptions());
  }
}
