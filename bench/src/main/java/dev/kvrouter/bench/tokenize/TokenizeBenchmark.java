package dev.kvrouter.bench.tokenize;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import dev.kvrouter.extproc.tokenize.Tokenizer;
import dev.kvrouter.extproc.tokenize.TokenizerLoader;
import dev.kvrouter.extproc.tokenize.TokenizerOptions;
import dev.kvrouter.extproc.tokenize.TokenizerOptions.Implementation;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Encoding one English-like document (no special tokens, so no segments to reuse): DJL's plain encode (what
 * the issue measured), DJL asked for ids only, and the pure-Java tokenizer with and without its per-word
 * cache. Run from the checkout root (or pass {@code -Dkvrouter.root=...}).
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"-Xmx2g", "-XX:+UseParallelGC"})
@State(Scope.Benchmark)
public class TokenizeBenchmark {

  @Param({"qwen3", "llama3_1"})
  public String model;

  @Param({"1000", "8000", "32000"})
  public int tokens;

  private HuggingFaceTokenizer djl;
  private Tokenizer djlIdsOnly;
  private Tokenizer pure;
  private Tokenizer pureNoWordCache;
  private String text;

  static Path tokenizerDir(String model) {
    Path root = Path.of(System.getProperty("kvrouter.root", "."));
    Path dir = root.resolve(".cache/tokenizers").resolve(model);
    if (!Files.isRegularFile(dir.resolve("tokenizer.json"))) {
      throw new IllegalStateException(dir + "/tokenizer.json missing: run scripts/fetch-tokenizers.sh, and run "
          + "the benchmarks from the checkout root or with -Dkvrouter.root=<checkout>");
    }
    return dir;
  }

  static HuggingFaceTokenizer djl(Path dir) throws Exception {
    return HuggingFaceTokenizer.newInstance(dir, Map.of("truncation", "false", "padding", "false"));
  }

  @Setup(Level.Trial)
  public void setUp() throws Exception {
    Path dir = tokenizerDir(model);
    djl = djl(dir);
    djlIdsOnly = TokenizerLoader.load(dir, TokenizerOptions.defaults().withImplementation(Implementation.DJL_UNSEGMENTED));
    pure = TokenizerLoader.load(dir, TokenizerOptions.defaults().withImplementation(Implementation.PURE_JAVA));
    pureNoWordCache = TokenizerLoader.load(dir,
        TokenizerOptions.defaults().withImplementation(Implementation.PURE_JAVA).withWordCacheSize(0));
    text = new SyntheticPrompts(42).prose(pure, tokens);
    if (djl.encode(text, false, false).getIds().length != pure.encode(text, false).length) {
      throw new IllegalStateException("DJL and pure Java disagree on the benchmark text");
    }
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    djl.close();
    djlIdsOnly.close();
    pure.close();
    pureNoWordCache.close();
  }

  @Benchmark
  public long[] djlEncode() {
    return djl.encode(text, false, false).getIds();
  }

  @Benchmark
  public int[] djlIdsOnly() {
    return djlIdsOnly.encode(text, false);
  }

  @Benchmark
  public int[] pureJava() {
    return pure.encode(text, false);
  }

  @Benchmark
  public int[] pureJavaNoWordCache() {
    return pureNoWordCache.encode(text, false);
  }
}
