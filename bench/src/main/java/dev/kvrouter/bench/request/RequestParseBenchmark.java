package dev.kvrouter.bench.request;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.extproc.request.CacheSaltRewriter;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.PreparedRequest;
import dev.kvrouter.extproc.request.RequestBodyParser;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.tenancy.SaltKey;
import dev.kvrouter.extproc.tenancy.TenantIsolation;
import dev.kvrouter.extproc.model.ModelRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The front of the request path on chat bodies of 1 KB, 100 KB and 1 MB (a system prompt, tools, a multi-turn
 * conversation with tool calls; 4% of the words multi-byte UTF-8), side by side with Jackson building the whole body as a
 * tree or a map (what a naive parser does):
 *
 * <ul>
 *   <li>{@code parse}: {@link RequestBodyParser} alone (streaming, one pass, prompt as plain values)
 *   <li>{@code prepareTenant}: parse + model lookup + effective salt + the cache_salt splice, i.e. everything the
 *       router does to a tenant's body before tokenization
 *   <li>{@code splice}: the cache_salt splice alone
 *   <li>{@code jacksonTree} / {@code jacksonMap}: {@code ObjectMapper.readTree} / {@code readValue(Map)} of the
 *       whole body, for comparison
 * </ul>
 *
 * <p>Sample-time mode, so the JSON carries p50/p99 per benchmark. Run:
 * {@code java -jar bench/target/benchmarks.jar 'bench.request.RequestParseBenchmark' -f 1 -wi 3 -i 5 -rf json
 * -rff bench/results/request-path.json}
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class RequestParseBenchmark {

  /** Chat bodies of about 1 KB, 100 KB and 1 MB of text; {@code 1m-image}: a short turn with a 1 MB base64 image. */
  @Param({"1k", "100k", "1m", "1m-image"})
  public String size;

  private byte[] body;
  private final RequestBodyParser parser = new RequestBodyParser();
  private final ObjectMapper mapper = new ObjectMapper();
  private RequestPreparer preparer;
  private PreparedRequest prepared;

  @Setup
  public void setup() throws Exception {
    String json = switch (size) {
      case "1k" -> ChatBodies.chat(1_000, 42);
      case "100k" -> ChatBodies.chat(100_000, 42);
      case "1m" -> ChatBodies.chat(1_000_000, 42);
      case "1m-image" -> ChatBodies.image(1_000_000, 42);
      default -> throw new IllegalArgumentException(size);
    };
    body = json.getBytes(StandardCharsets.UTF_8);
    preparer = new RequestPreparer(ModelRegistry.empty(new SimpleMeterRegistry()),
        new TenantIsolation(SaltKey.hmac("benchmark-secret-0123456789".getBytes(StandardCharsets.UTF_8)), false),
        System::nanoTime);
    prepared = preparer.prepare(InferenceRequest.Kind.CHAT, body, body.length, "tenant-a");
    if (!prepared.rewritesBody()) {
      throw new IllegalStateException("the tenant's body must need a rewrite");
    }
  }

  @Benchmark
  public InferenceRequest parse() throws Exception {
    return parser.parse(InferenceRequest.Kind.CHAT, body, body.length);
  }

  @Benchmark
  public byte[] prepareTenant() throws Exception {
    PreparedRequest p = preparer.prepare(InferenceRequest.Kind.CHAT, body, body.length, "tenant-a");
    return p.rewriteBody(body, body.length);
  }

  @Benchmark
  public byte[] splice() {
    return CacheSaltRewriter.rewrite(body, body.length, prepared.request().saltSites(),
        prepared.scope().effectiveSalt());
  }

  @Benchmark
  public JsonNode jacksonTree() throws Exception {
    return mapper.readTree(body);
  }

  @Benchmark
  public Map<?, ?> jacksonMap() throws Exception {
    return mapper.readValue(body, Map.class);
  }

  /** Deterministic chat bodies of about a given size. */
  static final class ChatBodies {
    // Mostly ASCII, as real prompts and code are, with a few multi-byte words (1 in 25).
    private static final String[] WORDS = {"the", "cache", "router", "prefix", "block", "token", "worker", "latency",
        "Envoy", "request", "prompt", "template", "model", "tenant", "salt", "vLLM", "and", "of", "to", "in", "is",
        "for", "that", "with", "as", "on", "by", "this", "be", "are", "from", "at", "or", "an", "it", "was", "which",
        "return", "value", "function", "if", "else", "config", "query", "result", "error", "naïve", "数据"};

    private ChatBodies() {}

    static String chat(int targetBytes, long seed) throws Exception {
      SplittableRandom r = new SplittableRandom(seed);
      ObjectMapper m = new ObjectMapper();
      StringBuilder sb = new StringBuilder();
      sb.append("{\"model\":\"Qwen/Qwen3-8B\",\"stream\":true,\"stream_options\":{\"include_usage\":true},")
          .append("\"max_tokens\":256,\"temperature\":0.7,\"chat_template_kwargs\":{\"enable_thinking\":false},")
          .append("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"search\",\"description\":")
          .append("\"Search the knowledge base\",\"parameters\":{\"type\":\"object\",\"properties\":{\"q\":")
          .append("{\"type\":\"string\"},\"k\":{\"type\":\"integer\"}},\"required\":[\"q\"]}}}],")
          .append("\"messages\":[{\"role\":\"system\",\"content\":")
          .append(m.writeValueAsString(words(r, 40))).append('}');
      int turn = 0;
      while (sb.length() < targetBytes - 200) {
        int room = Math.max(8, (targetBytes - sb.length()) / 6);
        int n = Math.min(room, 30 + r.nextInt(400));
        switch (turn++ % 4) {
          case 0 -> sb.append(",{\"role\":\"user\",\"content\":").append(m.writeValueAsString(words(r, n)))
              .append('}');
          case 1 -> sb.append(",{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_")
              .append(turn).append("\",\"type\":\"function\",\"function\":{\"name\":\"search\",\"arguments\":")
              .append(m.writeValueAsString("{\"q\": \"" + words(r, 6) + "\"}")).append("}}]}");
          case 2 -> sb.append(",{\"role\":\"tool\",\"tool_call_id\":\"call_").append(turn - 1)
              .append("\",\"content\":").append(m.writeValueAsString(words(r, n))).append('}');
          default -> sb.append(",{\"role\":\"assistant\",\"content\":").append(m.writeValueAsString(words(r, n)))
              .append('}');
        }
      }
      return sb.append("]}").toString();
    }

    /** One user turn with a text part and a base64 JPEG-like data URL of about {@code imageBytes}. */
    static String image(int imageBytes, long seed) {
      SplittableRandom r = new SplittableRandom(seed);
      String alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
      StringBuilder b64 = new StringBuilder(imageBytes);
      for (int i = 0; i < imageBytes; i++) {
        b64.append(alphabet.charAt(r.nextInt(64)));
      }
      return "{\"model\":\"Qwen/Qwen2.5-VL-7B-Instruct\",\"max_tokens\":128,\"messages\":["
          + "{\"role\":\"system\",\"content\":\"" + words(r, 30) + "\"},"
          + "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"" + words(r, 20) + "\"},"
          + "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/jpeg;base64," + b64 + "\"}}]}]}";
    }

    private static String words(SplittableRandom r, int n) {
      StringBuilder sb = new StringBuilder();
      for (int i = 0; i < n; i++) {
        sb.append(i == 0 ? "" : " ").append(WORDS[r.nextInt(WORDS.length)]);
      }
      return sb.toString();
    }
  }
}
