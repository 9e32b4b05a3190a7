package dev.kvrouter.extproc.tokenize;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.tokenize.GoldenFixtures.Case;
import dev.kvrouter.extproc.tokenize.TokenizerOptions.Implementation;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Segment caching is exact (cold and warm give the golden ids), counted, shared by fingerprint, and bounded. */
class SegmentCacheTest {

  private static Tokenizer load(String model, Implementation impl, SegmentCache cache) throws Exception {
    return TokenizerLoader.load(GoldenFixtures.tokenizerDir(model),
        TokenizerOptions.defaults().withImplementation(impl).withSegmentCache(cache));
  }

  @ParameterizedTest
  @ValueSource(strings = {"qwen3", "llama3_1", "deepseek_v3", "gemma3"})
  void coldAndWarm_bothMatchTheGoldenIds(String model) throws Exception {
    SegmentCache cache = SegmentCache.create(1 << 22, 16, Runnable::run);
    List<Case> cases = GoldenFixtures.cases(model).stream()
        .filter(c -> c.full() && (c.id().startsWith("chat/") || c.id().startsWith("added/") || c.id().startsWith("corpus/")))
        .toList();
    try (Tokenizer t = load(model, Implementation.PURE_JAVA, cache)) {
      TokenizerGoldenTest.check(t, cases);
      SegmentCache.Stats afterCold = cache.stats();
      TokenizerGoldenTest.check(t, cases);
      SegmentCache.Stats afterWarm = cache.stats();
      assertThat(afterCold.misses()).isPositive();
      assertThat(afterWarm.misses()).as("every cacheable segment was seen in the cold pass").isEqualTo(afterCold.misses());
      assertThat(afterWarm.hits() - afterCold.hits()).isPositive();
      assertThat(afterWarm.hitTokens()).isGreaterThan(afterCold.hitTokens());
    }
  }

  @Test
  void djlSegmented_isExactWithTheCacheToo() throws Exception {
    SegmentCache cache = SegmentCache.create(1 << 22, 16, Runnable::run);
    List<Case> cases = GoldenFixtures.cases("llama3_1").stream().filter(c -> c.id().startsWith("chat/")).toList();
    try (Tokenizer t = load("llama3_1", Implementation.DJL, cache)) {
      assertThat(t.implementation()).isEqualTo("djl-segmented");
      TokenizerGoldenTest.check(t, cases);
      TokenizerGoldenTest.check(t, cases);
      assertThat(cache.stats().hits()).isPositive();
    }
  }

  @Test
  void entriesAreScopedByTokenizer_soModelsNeverSeeEachOthersIds() throws Exception {
    SegmentCache cache = SegmentCache.create(1 << 22, 16, Runnable::run);
    String text = "A segment long enough to be cached, identical for both tokenizers.";
    try (Tokenizer qwen = load("qwen3", Implementation.PURE_JAVA, cache);
        Tokenizer llama = load("llama3_1", Implementation.PURE_JAVA, cache)) {
      int[] q = qwen.encode(text, false);
      int[] l = llama.encode(text, false);
      assertThat(qwen.fingerprint()).isNotEqualTo(llama.fingerprint());
      assertThat(cache.stats().misses()).isEqualTo(2);
      assertThat(qwen.encode(text, false)).containsExactly(q);
      assertThat(llama.encode(text, false)).containsExactly(l);
      assertThat(cache.stats().hits()).isEqualTo(2);
    }
  }

  @Test
  void aHashCollision_isAMiss_neverForeignIds() {
    SegmentCache cache = SegmentCache.create(10_000, 1, Runnable::run);
    String a = "first segment text";
    String b = "other segment text";
    SegmentCache.Key key = cache.key(7, a, 0, a.length());
    cache.put(key, a, 0, new int[] {1, 2, 3});
    // Same key (as if the hashes collided), different text: must not return a's ids.
    assertThat(cache.get(key, b, 0, b.length())).isNull();
    assertThat(cache.get(key, a, 0, a.length())).containsExactly(1, 2, 3);
    assertThat(cache.stats().collisions()).isEqualTo(1);
    assertThat(cache.stats().hits()).isEqualTo(1);
  }

  @Test
  void totalCachedTokens_stayWithinTheBound() throws Exception {
    long bound = 2_000;
    SegmentCache cache = SegmentCache.create(bound, 16, Runnable::run);
    String corpus = GoldenFixtures.corpus();
    try (Tokenizer t = load("qwen3", Implementation.PURE_JAVA, cache)) {
      // Many distinct segments, each between two added tokens.
      StringBuilder prompt = new StringBuilder();
      for (int i = 0; i < 200; i++) {
        prompt.append("<|im_start|>user\n").append(corpus, i * 300, i * 300 + 250).append("<|im_end|>\n");
      }
      t.encode(prompt, false);
      cache.cleanUp();
      SegmentCache.Stats s = cache.stats();
      assertThat(s.misses()).isGreaterThanOrEqualTo(200);
      assertThat(s.weightedTokens()).isLessThanOrEqualTo(bound);
      assertThat(s.evictions()).isPositive();
    }
  }

  @Test
  void micrometerBinding_exposesCacheAndTokenCounters() throws Exception {
    SegmentCache cache = SegmentCache.create(1 << 20, 16, Runnable::run);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    cache.bindTo(registry, "segments");
    try (Tokenizer t = load("llama3_1", Implementation.PURE_JAVA, cache)) {
      String text = "<|start_header_id|>user<|end_header_id|>\n\nA question long enough to be cached here.<|eot_id|>";
      int tokens = t.encode(text, false).length;
      t.encode(text, false);
      assertThat(registry.get("cache.gets").tag("result", "hit").functionCounter().count()).isEqualTo(1.0);
      assertThat(registry.get("kvrouter_tokenizer_segment_cache_tokens").tag("result", "hit").functionCounter().count())
          .isPositive()
          .isLessThan(tokens);
    }
  }
}
