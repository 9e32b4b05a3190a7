package dev.kvrouter.bench.pipeline;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.model.ModelSpec;
import dev.kvrouter.extproc.model.ResourceState;
import dev.kvrouter.extproc.pipeline.PipelineResources;
import dev.kvrouter.extproc.pipeline.PromptPipeline;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.PreparedRequest;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.extproc.tenancy.TenantIsolation;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.Executors;
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
 * Request to block hashes, the whole request path before the index: an OpenAI chat body is parsed, the model's
 * real chat template renders it, the tokenizer tokenizes it and the full blocks are hashed ({@link
 * RequestPreparer} + {@link PromptPipeline}, early stop off so every block is hashed). Beside it, in the same
 * run, DJL's plain encode of the same rendered prompt (tokenization only, nothing else).
 *
 * <ul>
 *   <li>{@code cold}: the segment cache is emptied before every request (a prompt never seen);
 *   <li>{@code turnsSeen}: a multi-turn conversation whose earlier turns were seen, only the last user turn new.
 * </ul>
 *
 * <p>{@code api}: the same conversation as a chat completions body, or as an Anthropic Messages body (the system
 * prompt in {@code system}, converted back to chat by {@code MessagesInput}); both render the same prompt, so the
 * difference is the Messages conversion's cost.
 *
 * <pre>
 * flock /tmp/kvrouter-bench.lock java -Dkvrouter.root=$PWD -jar bench/target/benchmarks.jar RequestToBlocks \
 *     -f 1 -wi 3 -i 5 -rf json -rff bench/results/request-to-blocks.json
 * </pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
@Fork(1)
public class RequestToBlocksBenchmark {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String[] WORDS = ("the of and to in is that for it as was with be by on not this are or from "
      + "at which but have an they you were there been one all we their has would when if so no will more about up "
      + "out who into can only other time new some could these two may first then do any like now over such our "
      + "router cache token prefix block worker latency request model engine prompt memory throughput scheduler "
      + "don't it's we're they've isn't can't").split(" ");

  @Param({"qwen3", "llama3_1"})
  public String model;

  @Param({"1000", "8000", "32000"})
  public int tokens;

  @Param({"chat", "messages"})
  public String api;

  private ModelRegistry registry;
  private SegmentCache segments;
  private RequestPreparer preparer;
  private PromptPipeline pipeline;
  private HuggingFaceTokenizer djl;
  private ArrayNode history;
  private String rendered;
  private long unique;

  @Setup(Level.Trial)
  public void setup() throws Exception {
    Path dir = Path.of(System.getProperty("kvrouter.root", ".")).resolve(".cache/tokenizers").resolve(model);
    segments = SegmentCache.create(SegmentCache.DEFAULT_MAX_TOKENS);
    registry = ModelRegistry.create(List.of(new ModelSpec(model, dir.resolve("tokenizer.json").toString(),
            dir.resolve("tokenizer_config.json").toString(), null, 16, List.of(), null, true)), dir,
        PipelineResources.loader(segments, Clock.systemUTC()), Executors.newSingleThreadExecutor(), System::nanoTime,
        new SimpleMeterRegistry());
    registry.preload();
    if (!(registry.await(model, Duration.ofSeconds(60)) instanceof ResourceState.Ready)) {
      throw new IllegalStateException("model did not load");
    }
    preparer = new RequestPreparer(registry, TenantIsolation.defaults(), System::nanoTime);
    pipeline = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, false,
        new SimpleMeterRegistry());
    djl = HuggingFaceTokenizer.builder().optTokenizerPath(dir).optTruncation(false).optAddSpecialTokens(false)
        .optMaxLength(1 << 20).build();
    // A conversation of about `tokens` tokens: system prompt, then alternating turns of ~300 words.
    SplittableRandom rnd = new SplittableRandom(42);
    history = JSON.createArrayNode();
    history.addObject().put("role", "system").put("content", paragraph(rnd, 200));
    int approxTokens = 260;
    boolean user = true;
    while (approxTokens < tokens - 400) {
      history.addObject().put("role", user ? "user" : "assistant").put("content", paragraph(rnd, 300));
      approxTokens += 345; // measured: about 1.15 tokens per word of this vocabulary in both tokenizers
      user = !user;
    }
    if (!user) {
      history.addObject().put("role", "assistant").put("content", paragraph(rnd, 50));
    }
    PromptPipeline.Outcome o = pipeline.run(prepare("What is the answer?"));
    if (o.prompt() == null) {
      throw new IllegalStateException("pipeline did not produce a prompt: " + o.unavailable());
    }
    rendered = registry.resolve(model).resources(PipelineResources.class).orElseThrow().chat(false)
        .render(new dev.kvrouter.extproc.template.ChatRequestFields(JSON.convertValue(withLast("q"), List.class),
            null, null, true, false, null, null, null));
    System.out.printf("%n[%s] prompt: %d tokens, %d blocks%n", model, o.prompt().tokens(),
        o.prompt().blockHashes().length);
  }

  private static String paragraph(SplittableRandom rnd, int words) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < words; i++) {
      b.append(i == 0 ? "" : " ").append(WORDS[rnd.nextInt(WORDS.length)]);
      if (rnd.nextInt(12) == 0) {
        b.append('.');
      }
    }
    return b.append('.').toString();
  }

  private ArrayNode withLast(String message) {
    ArrayNode messages = history.deepCopy();
    messages.addObject().put("role", "user").put("content", message);
    return messages;
  }

  private byte[] bodyHead;
  private byte[] bodyTail;
  private byte[] bodyBuffer = new byte[0];

  /**
   * The request body with a new last message, spliced as bytes into one reused buffer: building and receiving
   * the body is the client's and the transport's cost, not the request path's, so it allocates nothing here
   * and {@code gc.alloc.rate.norm} counts only the path under test.
   */
  private PreparedRequest prepare(String lastMessage) throws Exception {
    boolean messagesApi = api.equals("messages");
    if (bodyHead == null) {
      ObjectNode b = JSON.createObjectNode();
      b.put("model", model);
      ArrayNode messages = withLast("\u0001");
      if (messagesApi) {
        b.put("max_tokens", 1024);
        b.set("system", messages.remove(0).get("content"));
      }
      b.set("messages", messages);
      String json = b.toString();
      int at = json.indexOf("\\u0001");
      bodyHead = json.substring(0, at).getBytes(StandardCharsets.UTF_8);
      bodyTail = json.substring(at + 6).getBytes(StandardCharsets.UTF_8);
    }
    int length = bodyHead.length + lastMessage.length() + bodyTail.length;
    if (bodyBuffer.length < length) {
      bodyBuffer = new byte[length + 256];
    }
    System.arraycopy(bodyHead, 0, bodyBuffer, 0, bodyHead.length);
    // plain ASCII words: one byte per char, no JSON escaping needed
    for (int i = 0; i < lastMessage.length(); i++) {
      bodyBuffer[bodyHead.length + i] = (byte) lastMessage.charAt(i);
    }
    System.arraycopy(bodyTail, 0, bodyBuffer, bodyHead.length + lastMessage.length(), bodyTail.length);
    return preparer.prepare(messagesApi ? InferenceRequest.Kind.MESSAGES : InferenceRequest.Kind.CHAT, bodyBuffer,
        length, null);
  }

  @Setup(Level.Invocation)
  public void nextRequest() {
    unique++;
  }

  /** A prompt never seen: empty segment cache (the tokenizer's word cache stays warm, as in a running router). */
  @Benchmark
  public long[] cold() throws Exception {
    segments.invalidateAll();
    return pipeline.run(prepare("Question number " + unique + ": what changed?")).prompt().blockHashes();
  }

  /** The same conversation again with a new last turn: earlier turns come from the segment cache. */
  @Benchmark
  public long[] turnsSeen() throws Exception {
    return pipeline.run(prepare("Question number " + unique + ": what changed?")).prompt().blockHashes();
  }

  /** DJL's plain encode of the rendered prompt: tokenization alone, no parse, no template, no hashing. */
  @Benchmark
  public long[] djlEncode() {
    return djl.encode(rendered + unique, false, false).getIds();
  }

  @TearDown(Level.Trial)
  public void close() {
    djl.close();
    registry.close();
  }
}
