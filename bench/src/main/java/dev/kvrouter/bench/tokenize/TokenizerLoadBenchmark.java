package dev.kvrouter.bench.tokenize;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import dev.kvrouter.extproc.tokenize.Tokenizer;
import dev.kvrouter.extproc.tokenize.TokenizerLoader;
import dev.kvrouter.extproc.tokenize.TokenizerOptions;
import dev.kvrouter.extproc.tokenize.TokenizerOptions.Implementation;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Loading a model's tokenizer (once per model at startup): tokenizer.json parse and table building for pure
 * Java (including the calibration encode), and DJL's native load, side by side. {@code pureJava} and {@code
 * djl} measure one load in a fresh JVM per fork (class loading and JIT included: the first model a router
 * loads); the {@code ...InWarmJvm} variants measure later loads, after two loads have warmed the JVM (every
 * further model).
 */
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 0)
@Measurement(iterations = 1)
@Fork(value = 3, jvmArgsAppend = {"-Xmx2g", "-XX:+UseParallelGC"})
@State(Scope.Benchmark)
public class TokenizerLoadBenchmark {

  @Param({"qwen3", "llama3_1", "deepseek_v3", "gemma3"})
  public String model;

  @Benchmark
  public int pureJava() throws Exception {
    try (Tokenizer t = TokenizerLoader.load(TokenizeBenchmark.tokenizerDir(model),
        TokenizerOptions.defaults().withImplementation(Implementation.PURE_JAVA))) {
      return t.encode("warm", false).length;
    }
  }

  @Benchmark
  @Warmup(iterations = 2)
  @Measurement(iterations = 3)
  @Fork(value = 1, jvmArgsAppend = {"-Xmx2g", "-XX:+UseParallelGC"})
  public int pureJavaInWarmJvm() throws Exception {
    return pureJava();
  }

  @Benchmark
  @Warmup(iterations = 2)
  @Measurement(iterations = 3)
  @Fork(value = 1, jvmArgsAppend = {"-Xmx2g", "-XX:+UseParallelGC"})
  public int djlInWarmJvm() throws Exception {
    return djl();
  }

  @Benchmark
  public int djl() throws Exception {
    try (HuggingFaceTokenizer t = TokenizeBenchmark.djl(TokenizeBenchmark.tokenizerDir(model))) {
      return t.encode("warm", false, false).getIds().length;
    }
  }
}
