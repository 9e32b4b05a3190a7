package dev.kvrouter.bench.template;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.extproc.template.ChatRequestFields;
import dev.kvrouter.extproc.template.ChatTemplate;
import dev.kvrouter.extproc.template.ChatTemplateInput;
import dev.kvrouter.extproc.template.ChatTemplateRenderer;
import dev.kvrouter.extproc.template.TemplateEnvironment;
import dev.kvrouter.extproc.template.TokenizerChatConfig;
import dev.kvrouter.extproc.template.VllmChatRenderer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
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
 * Rendering a 20-turn conversation with tools through the real chat templates: the Qwen3 and
 * Llama 3.1 templates from the tokenizer packages and vLLM's tool-calling Llama 3.1 JSON template.
 * {@code render*} is apply_chat_template alone; {@code vllm*} adds vLLM's message preprocessing
 * (from request-shaped messages with JSON-string tool arguments); {@code concatFloor} is plain
 * string concatenation of the same messages, the floor any renderer pays; {@code compile*} is the
 * one-time cost per template.
 *
 * <p>Run from the checkout root (it reads .cache/tokenizers and the test-resource templates):
 * {@code java -jar bench/target/benchmarks.jar ChatTemplateBenchmark -f 1 -wi 3 -i 5}.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"-Xmx1g"})
public class ChatTemplateBenchmark {
  @Param({"20"})
  int turns;

  private ChatTemplateRenderer qwen3;
  private ChatTemplateRenderer llama31;
  private ChatTemplateRenderer llama31Json;
  private VllmChatRenderer qwen3Vllm;
  private String qwen3Source;
  private String llama31JsonSource;
  private ChatTemplateInput input;
  private ChatRequestFields request;

  @Setup
  public void setup() throws IOException {
    Path root = findRoot();
    TemplateEnvironment env = TemplateEnvironment.systemDefault();
    TokenizerChatConfig q = TokenizerChatConfig.load(root.resolve(".cache/tokenizers/qwen3/tokenizer_config.json"));
    TokenizerChatConfig l = TokenizerChatConfig.load(root.resolve(".cache/tokenizers/llama3_1/tokenizer_config.json"));
    qwen3Source = q.select(true);
    qwen3 = new ChatTemplateRenderer(ChatTemplate.compile(qwen3Source), q.specialTokens(), env);
    llama31 = new ChatTemplateRenderer(ChatTemplate.compile(l.select(true)), l.specialTokens(), env);
    llama31JsonSource = Files.readString(root.resolve(
        "ext-proc/src/test/resources/fixtures/templates/vllm_examples/tool_chat_template_llama3.1_json.jinja"));
    llama31Json = new ChatTemplateRenderer(ChatTemplate.compile(llama31JsonSource), l.specialTokens(), env);
    qwen3Vllm = VllmChatRenderer.withDefaults(qwen3);
    List<Map<String, Object>> conversation = BenchConversations.conversation(turns);
    input = new ChatTemplateInput(conversation, BenchConversations.tools(), null, true, null, Map.of());
    // The request form: tool-call arguments as JSON strings, as clients send them.
    ObjectMapper json = new ObjectMapper();
    List<Map<String, Object>> requestMessages = BenchConversations.conversation(turns);
    for (Map<String, Object> m : requestMessages) {
      if (m.get("tool_calls") instanceof List<?> calls) {
        for (Object c : calls) {
          @SuppressWarnings("unchecked")
          Map<String, Object> fn = (Map<String, Object>) ((Map<String, Object>) c).get("function");
          fn.put("arguments", json.writeValueAsString(fn.get("arguments")));
        }
      }
    }
    request = new ChatRequestFields(requestMessages, BenchConversations.tools(), "auto", true, false, null, null, null);
  }

  private static Path findRoot() {
    for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
      if (Files.isDirectory(p.resolve(".cache/tokenizers"))) {
        return p;
      }
    }
    throw new IllegalStateException("run from the kvrouter checkout (needs .cache/tokenizers)");
  }

  @Benchmark
  public String renderQwen3() {
    return qwen3.render(input);
  }

  @Benchmark
  public String renderLlama31() {
    return llama31.render(input);
  }

  @Benchmark
  public String renderLlama31JsonTools() {
    return llama31Json.render(input);
  }

  @Benchmark
  public String vllmQwen3FromRequest() {
    return qwen3Vllm.render(request);
  }

  @Benchmark
  public String concatFloor() {
    StringBuilder sb = new StringBuilder();
    for (Map<String, ?> m : input.messages()) {
      sb.append("<|im_start|>").append(m.get("role")).append('\n').append(m.get("content")).append("<|im_end|>\n");
    }
    return sb.toString();
  }

  @Benchmark
  public ChatTemplate compileQwen3() {
    return ChatTemplate.compile(qwen3Source);
  }

  @Benchmark
  public ChatTemplate compileLlama31Json() {
    return ChatTemplate.compile(llama31JsonSource);
  }

  /**
   * Prints length and SHA-256 prefix of each prompt; scripts/fixtures/chat_templates_pybench.py
   * prints the same for transformers, so the two runs are shown to render identical text.
   */
  public static void main(String[] args) throws Exception {
    ChatTemplateBenchmark b = new ChatTemplateBenchmark();
    b.turns = 20;
    b.setup();
    Map<String, String> prompts = new java.util.LinkedHashMap<>();
    prompts.put("renderQwen3", b.renderQwen3());
    prompts.put("renderLlama31", b.renderLlama31());
    prompts.put("renderLlama31JsonTools", b.renderLlama31JsonTools());
    prompts.put("vllmQwen3FromRequest", b.vllmQwen3FromRequest());
    for (var e : prompts.entrySet()) {
      byte[] d = java.security.MessageDigest.getInstance("SHA-256")
          .digest(e.getValue().getBytes(java.nio.charset.StandardCharsets.UTF_8));
      System.out.printf("%-24s chars %d  sha256 %s%n", e.getKey(), e.getValue().length(),
          java.util.HexFormat.of().formatHex(d).substring(0, 16));
    }
  }
}
