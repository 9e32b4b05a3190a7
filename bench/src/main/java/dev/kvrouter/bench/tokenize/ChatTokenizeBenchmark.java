package dev.kvrouter.bench.tokenize;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import dev.kvrouter.extproc.tokenize.TokenCursor;
import dev.kvrouter.extproc.tokenize.Tokenizer;
import dev.kvrouter.extproc.tokenize.TokenizerLoader;
import dev.kvrouter.extproc.tokenize.TokenizerOptions;
import dev.kvrouter.extproc.tokenize.TokenizerOptions.Implementation;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import java.nio.file.Path;
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
 * A chat-rendered conversation of about {@code tokens} tokens whose last user turn is new on every call
 * (built before the call, outside the measurement):
 *
 * <ul>
 *   <li>{@code djlEncode}: DJL's plain encode of the whole prompt;
 *   <li>{@code cold}: pure Java, no segment cache (the per-word cache is warm, as in steady state);
 *   <li>{@code warm}: pure Java, earlier turns seen (segment cache warm), only the last turn new;
 *   <li>{@code warmToBlockHashes}: {@code warm} plus hashing every full 16-token block;
 *   <li>{@code coldToBlockHashes}: {@code cold} plus hashing every full 16-token block;
 *   <li>{@code coldEarlyStop}: cold, stopping after the first quarter of the tokens and estimating the rest.
 * </ul>
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"-Xmx2g", "-XX:+UseParallelGC"})
@State(Scope.Benchmark)
public class ChatTokenizeBenchmark {
  private static final int BLOCK = 16;

  @Param({"qwen3", "llama3_1"})
  public String model;

  @Param({"1000", "8000", "32000"})
  public int tokens;

  private HuggingFaceTokenizer djl;
  private Tokenizer cold;
  private Tokenizer warm;
  private SyntheticPrompts.Chat chat;
  private SyntheticPrompts lastTurns;
  private long root;
  private long calls;
  private int quarter;
  private String prompt;

  @Setup(Level.Trial)
  public void setUp() throws Exception {
    Path dir = TokenizeBenchmark.tokenizerDir(model);
    djl = TokenizeBenchmark.djl(dir);
    cold = TokenizerLoader.load(dir, TokenizerOptions.defaults().withImplementation(Implementation.PURE_JAVA));
    warm = TokenizerLoader.load(dir, TokenizerOptions.defaults().withImplementation(Implementation.PURE_JAVA)
        .withSegmentCache(SegmentCache.create(SegmentCache.DEFAULT_MAX_TOKENS)));
    chat = new SyntheticPrompts(7).chat(cold, model, tokens);
    lastTurns = new SyntheticPrompts(11);
    root = BlockHasher.rootSeed(new CacheNamespace(model, null, null));
    String first = chat.withLastTurn(lastTurns.lastMessage(-1));
    int[] expected = cold.encode(first, false);
    if (djl.encode(first, false, false).getIds().length != expected.length
        || warm.encode(first, false).length != expected.length) {
      throw new IllegalStateException("implementations disagree on the benchmark prompt");
    }
    quarter = expected.length / 4;
  }

  /** A new last user turn for every call, so the warm case never hits the cache for it. */
  @Setup(Level.Invocation)
  public void nextPrompt() {
    prompt = chat.withLastTurn(lastTurns.lastMessage(calls++));
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    djl.close();
    cold.close();
    warm.close();
  }

  @Benchmark
  public long[] djlEncode() {
    return djl.encode(prompt, false, false).getIds();
  }

  @Benchmark
  public int[] cold() {
    return cold.encode(prompt, false);
  }

  @Benchmark
  public int[] warm() {
    return warm.encode(prompt, false);
  }

  @Benchmark
  public long[] warmToBlockHashes() {
    int[] ids = warm.encode(prompt, false);
    return BlockHasher.hashFullBlocks(root, ids, ids.length, BLOCK);
  }

  @Benchmark
  public long[] coldToBlockHashes() {
    int[] ids = cold.encode(prompt, false);
    return BlockHasher.hashFullBlocks(root, ids, ids.length, BLOCK);
  }

  @Benchmark
  public long coldEarlyStop() {
    TokenCursor cursor = cold.cursor(prompt, false);
    cursor.advance(quarter);
    long[] hashes = BlockHasher.hashFullBlocks(root, cursor.tokens(), cursor.tokenCount(), BLOCK);
    return hashes.length + cursor.estimatedTotalTokens();
  }
}
