package dev.kvrouter.extproc.tokenize;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.tokenize.GoldenFixtures.Case;
import dev.kvrouter.extproc.tokenize.TokenizerOptions.Implementation;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Incremental encoding: every prefix is final and exact, estimates are sane, finishing elsewhere works. */
class TokenCursorTest {

  private static List<Case> cases(String model) {
    return GoldenFixtures.cases(model).stream()
        .filter(c -> c.full() && (c.id().startsWith("chat/") || c.id().startsWith("corpus/") || c.id().startsWith("added/")))
        .toList();
  }

  @ParameterizedTest
  @ValueSource(strings = {"qwen3", "llama3_1", "deepseek_v3", "gemma3"})
  void everyAdvance_yieldsAnExactPrefix(String model) {
    Tokenizer t = GoldenFixtures.tokenizer(model, Implementation.PURE_JAVA);
    for (Case c : cases(model)) {
      for (int chunk : new int[] {1, 16, 257}) {
        TokenCursor cursor = t.cursor(c.text(), false);
        int previous = 0;
        int steps = 0;
        while (!cursor.isComplete()) {
          int n = cursor.advance(chunk);
          assertThat(n).as("%s chunk %d", c.id(), chunk).isGreaterThanOrEqualTo(previous);
          if (!cursor.isComplete()) {
            assertThat(n - previous).as("%s: advance delivers at least what was asked", c.id()).isGreaterThanOrEqualTo(chunk);
          }
          int[] prefix = Arrays.copyOf(cursor.tokens(), n);
          String d = GoldenFixtures.firstDifference(Arrays.copyOf(c.ids(), Math.min(n, c.ids().length)), prefix);
          assertThat(d).as("%s chunk %d after %d tokens", c.id(), chunk, n).isNull();
          previous = n;
          assertThat(++steps).as("bounded number of steps").isLessThanOrEqualTo(c.ids().length + 2);
        }
        assertThat(cursor.tokenCount()).isEqualTo(c.ids().length);
        assertThat(cursor.remainingChars()).isZero();
        assertThat(cursor.estimatedTotalTokens()).isEqualTo(c.ids().length);
      }
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"qwen3", "llama3_1"})
  void aCallersBuffer_isWrittenExactlyAndHandedBack(String model) {
    Tokenizer t = GoldenFixtures.tokenizer(model, Implementation.PURE_JAVA);
    int[] small = new int[4];
    for (Case c : cases(model)) {
      // A buffer too small for the estimate is replaced; one large enough is written in place.
      TokenCursor grown = t.cursor(c.text(), false, small);
      assertThat(grown.finish()).as(c.id()).isEqualTo(c.ids());
      int[] big = new int[3 * c.text().length() + 64];
      Arrays.fill(big, -7); // stale contents of an earlier, longer prompt must not show through
      TokenCursor cursor = t.cursor(c.text(), false, big);
      int[] ids = cursor.finish();
      assertThat(ids).as(c.id()).isEqualTo(c.ids());
      assertThat(cursor.tokens()).as("%s: the cursor wrote into the caller's buffer", c.id()).isSameAs(big);
      assertThat(ids).as("finish() returns a copy the caller may keep").isNotSameAs(big);
      assertThat(Arrays.copyOf(big, ids.length)).isEqualTo(c.ids());
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"qwen3", "llama3_1", "gemma3"})
  void estimateOfTheRest_isWithinAThirdForProse(String model) {
    Tokenizer t = GoldenFixtures.tokenizer(model, Implementation.PURE_JAVA);
    Case eightK = GoldenFixtures.cases(model).stream().filter(c -> c.id().equals("corpus/3")).findFirst().orElseThrow();
    TokenCursor cursor = t.cursor(eightK.text(), false);
    cursor.advance(512);
    assertThat(cursor.remainingChars()).isPositive();
    long estimate = cursor.estimatedTotalTokens();
    int actual = eightK.ids().length;
    assertThat((double) estimate).isBetween(actual * 0.67, actual * 1.33);
  }

  @ParameterizedTest
  @ValueSource(strings = {"llama3_1", "gemma3"})
  void addedTokensAhead_areCountedExactly(String model) {
    Tokenizer t = GoldenFixtures.tokenizer(model, Implementation.PURE_JAVA);
    // Only added tokens: the estimate is exact before anything is tokenized.
    String bos = model.equals("gemma3") ? "<bos>" : "<|begin_of_text|>";
    String text = bos.repeat(7);
    TokenCursor cursor = t.cursor(text, true);
    assertThat(cursor.estimatedTotalTokens()).isEqualTo(t.encode(text, true).length);
  }

  @ParameterizedTest
  @ValueSource(strings = {"qwen3", "gemma3"})
  void finishAsync_completesOnAnotherThreadWithAllIds(String model) throws Exception {
    Tokenizer t = GoldenFixtures.tokenizer(model, Implementation.PURE_JAVA);
    Case c = GoldenFixtures.cases(model).stream().filter(x -> x.id().equals("corpus/3")).findFirst().orElseThrow();
    ExecutorService executor = Executors.newSingleThreadExecutor();
    try {
      TokenCursor cursor = t.cursor(c.text(), true);
      cursor.advance(100);
      int[] all = cursor.finishAsync(executor).get(30, TimeUnit.SECONDS);
      assertThat(GoldenFixtures.firstDifference(c.idsSpecial(), all)).isNull();
    } finally {
      executor.shutdownNow();
    }
  }
}
