package dev.kvrouter.extproc.tokenize;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.tokenize.GoldenFixtures.Case;
import dev.kvrouter.extproc.tokenize.TokenizerOptions.Implementation;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** One tokenizer, one small word cache and one small segment cache shared by several threads stay exact. */
class ConcurrentEncodeTest {

  @Test
  void sharedTokenizer_isExactUnderConcurrentUse() throws Exception {
    // Tiny caches so that threads constantly replace each other's entries.
    SegmentCache cache = SegmentCache.create(5_000, 16, null);
    Tokenizer t = TokenizerLoader.load(GoldenFixtures.tokenizerDir("qwen3"), TokenizerOptions.defaults()
        .withImplementation(Implementation.PURE_JAVA).withSegmentCache(cache).withWordCacheSize(64));
    List<Case> cases = GoldenFixtures.cases("qwen3").stream().filter(Case::full).toList();
    int threads = 4;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try {
      List<Callable<List<String>>> work = new ArrayList<>();
      for (int w = 0; w < threads; w++) {
        int offset = w * 37;
        work.add(() -> {
          List<String> failures = new ArrayList<>();
          for (int round = 0; round < 2; round++) {
            for (int i = 0; i < cases.size(); i++) {
              Case c = cases.get((i + offset) % cases.size());
              String d = GoldenFixtures.firstDifference(c.ids(), t.encode(c.text(), false));
              if (d != null) {
                failures.add(c.id() + ": " + d);
              }
            }
          }
          return failures;
        });
      }
      List<String> failures = new ArrayList<>();
      for (Future<List<String>> f : pool.invokeAll(work, 120, TimeUnit.SECONDS)) {
        assertThat(f.isCancelled()).as("finished within the time bound").isFalse();
        failures.addAll(f.get());
      }
      assertThat(failures).isEmpty();
      assertThat(cache.stats().hits()).isPositive();
    } finally {
      pool.shutdownNow();
      t.close();
    }
  }
}
