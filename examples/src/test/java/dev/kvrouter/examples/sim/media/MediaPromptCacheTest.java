package dev.kvrouter.examples.sim.media;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.examples.sim.clock.VirtualClock;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.engine.MediaSpan;
import dev.kvrouter.examples.sim.engine.OutputTokens;
import dev.kvrouter.examples.sim.engine.RequestSpec;
import dev.kvrouter.examples.sim.engine.SimEngine;
import dev.kvrouter.examples.sim.http.PipelinePromptEncoder;
import dev.kvrouter.examples.sim.http.PromptEncoder;
import dev.kvrouter.examples.sim.testing.Fixtures;
import dev.kvrouter.examples.sim.testing.RecordingObserver;
import dev.kvrouter.examples.sim.testing.RecordingSink;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.extproc.model.MultimodalSpec;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import dev.kvrouter.index.wire.BlockStored;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The simulated worker's media path on Gemma 3's real tokenizer: the router's expansion (256 soft tokens per image,
 * its newline merges), vLLM's per-block {@code [identifier, offset]} keys in the prefix cache and on
 * {@code BlockStored}, and a 400 for media the model cannot take.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MediaPromptCacheTest {

  static final String MODEL = "gemma3";
  static final int BS = 16;
  PipelinePromptEncoder vision;
  PipelinePromptEncoder textOnly;

  @BeforeAll
  void load() throws Exception {
    vision = PipelinePromptEncoder.load(MODEL, Fixtures.tokenizer("gemma3"),
        new MultimodalSpec("gemma3", null, null, null, null), SegmentCache.create(SegmentCache.DEFAULT_MAX_TOKENS));
    textOnly = PipelinePromptEncoder.load(MODEL, Fixtures.tokenizer("gemma3"), null,
        SegmentCache.create(SegmentCache.DEFAULT_MAX_TOKENS));
  }

  @AfterAll
  void close() {
    vision.close();
    textOnly.close();
  }

  @Test
  void imagesExpandToGemmasSoftTokensAtOnePosition() {
    PromptEncoder.ChatTokens p = vision.encodeChatPrompt(MediaRequests.image(MODEL, "https://x/a.png", "a"));
    assertThat(p.media()).hasSize(1);
    MediaSpan m = p.media().get(0);
    assertThat(m.identifier()).isEqualTo("a");
    assertThat(m.length()).as("\\n\\n<start_of_image> + 256 soft tokens + <end_of_image>\\n\\n").isEqualTo(260);
    int soft = vision.resources().tokenizer().encode("<image_soft_token>", false)[0];
    long softCount = java.util.Arrays.stream(p.tokens()).filter(t -> t == soft).count();
    assertThat(softCount).isEqualTo(256);
    assertThat(p.tokens()[m.offset() + 2]).as("soft tokens follow <start_of_image>").isEqualTo(soft);
    assertThat(m.end()).isLessThanOrEqualTo(p.tokens().length);
  }

  @Test
  void withoutAUuidTheEngineKeysByItsOwnContentHash() {
    PromptEncoder.ChatTokens a = vision.encodeChatPrompt(MediaRequests.image(MODEL, "https://x/a.png", null));
    PromptEncoder.ChatTokens again = vision.encodeChatPrompt(MediaRequests.image(MODEL, "https://x/a.png", null));
    PromptEncoder.ChatTokens b = vision.encodeChatPrompt(MediaRequests.image(MODEL, "https://x/b.png", null));
    String id = a.media().get(0).identifier();
    assertThat(id).startsWith("sim-mm:image:").isEqualTo(again.media().get(0).identifier())
        .isNotEqualTo(b.media().get(0).identifier());
  }

  @Test
  void sameTextDifferentImageSharesOnlyThePreImageBlocksAndTheSameUuidHits() {
    PromptEncoder.ChatTokens a = vision.encodeChatPrompt(MediaRequests.image(MODEL, "https://x/chart.png", "chart-a"));
    PromptEncoder.ChatTokens b = vision.encodeChatPrompt(MediaRequests.image(MODEL, "https://x/chart.png", "chart-b"));
    assertThat(b.tokens()).as("the uuid changes no token").containsExactly(a.tokens());
    int imageStart = a.media().get(0).offset();
    int preImageBlocks = imageStart / BS;
    int cacheable = (a.tokens().length - 1) / BS; // the last token is always computed
    assertThat(preImageBlocks).isPositive().isLessThan(cacheable);

    VirtualClock clock = new VirtualClock(1.7e9);
    RecordingSink sink = new RecordingSink();
    EngineConfig c = EngineConfig.builder(MODEL).blockSize(BS).numGpuBlocks(256).maxModelLen(4096)
        .maxNumBatchedTokens(4096).seed(1).build();
    SimEngine engine = new SimEngine("w", c, clock, Presets.DEFAULT.timingModel(), sink, OutputTokens.range(1, 9));

    assertThat(run(engine, clock, "a1", a).cachedTokens()).isZero();
    assertThat(run(engine, clock, "b1", b).cachedTokens()).as("another image: only the blocks before it")
        .isEqualTo(preImageBlocks * BS);
    assertThat(run(engine, clock, "a2", a).cachedTokens()).as("the same uuid: every cacheable block")
        .isEqualTo(cacheable * BS);
    // text alone (no media keys) matches the image prompt's pre-image blocks only, not its image blocks
    assertThat(run(engine, clock, "t1", new PromptEncoder.ChatTokens(a.tokens(), List.of())).cachedTokens())
        .isEqualTo(preImageBlocks * BS);

    // BlockStored of the first request: one extra_keys entry per block, [uuid, offset] on the image's blocks
    List<BlockStored> stored = sink.events(BlockStored.class);
    BlockStored first = stored.get(0);
    assertThat(first.parentBlockHash()).isNull();
    List<List<Object>> keys = new ArrayList<>();
    for (BlockStored s : stored.subList(0, countUntilFull(stored, a.tokens().length / BS))) {
      assertThat(s.extraKeys()).hasSize(s.blockHashes().length);
      keys.addAll(s.extraKeys());
    }
    for (int blk = 0; blk < a.tokens().length / BS; blk++) {
      int start = blk * BS;
      boolean overlaps = imageStart < start + BS && imageStart + 260 > start;
      if (overlaps) {
        assertThat(keys.get(blk)).as("block %d", blk).containsExactly(List.of("chart-a", (long) (imageStart - start)));
      } else {
        assertThat(keys.get(blk)).as("block %d", blk).isNull();
      }
    }
  }

  @Test
  void textOnlyRequestsAreUnchanged() {
    var req = MediaRequests.JSON.createObjectNode().put("model", MODEL);
    req.putArray("messages").addObject().put("role", "user").put("content", MediaRequests.TEXT);
    PromptEncoder.ChatTokens p = vision.encodeChatPrompt(req);
    assertThat(p.media()).isEmpty();
    assertThat(p.tokens()).containsExactly(textOnly.encodeChat(req));
    RequestSpec spec = new RequestSpec("t", p.tokens(), 1, null, null, 0L);
    assertThat(spec.media()).isEmpty();
  }

  @Test
  void mediaTheModelCannotTakeIsABadRequest() {
    assertThatThrownBy(() -> textOnly.encodeChatPrompt(MediaRequests.image(MODEL, "https://x/a.png", "a")))
        .isInstanceOf(PromptEncoder.BadInput.class).hasMessageContaining("does not support image input");
    assertThatThrownBy(() -> vision.encodeChatPrompt(MediaRequests.audio(MODEL)))
        .isInstanceOf(PromptEncoder.BadInput.class).hasMessageContaining("does not support audio input");
  }

  /** How many of the first events it takes to cover {@code blocks} blocks (one request's stores). */
  private static int countUntilFull(List<BlockStored> stored, int blocks) {
    int n = 0;
    int covered = 0;
    while (covered < blocks) {
      covered += stored.get(n++).blockHashes().length;
    }
    assertThat(covered).isEqualTo(blocks);
    return n;
  }

  private static dev.kvrouter.examples.sim.engine.RequestOutcome run(SimEngine e, VirtualClock clock, String id,
      PromptEncoder.ChatTokens p) {
    RecordingObserver o = new RecordingObserver();
    clock.schedule(clock.nanoTime() + 1_000_000,
        () -> e.submitNow(new RequestSpec(id, p.tokens(), 1, null, null, 0L, p.media()), o));
    clock.runUntilIdle(100_000);
    assertThat(o.outcome).as(id).isNotNull();
    return o.outcome;
  }
}
