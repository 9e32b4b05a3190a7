package dev.kvrouter.extproc.template;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Renders every golden conversation (scripts/fixtures/chat_templates.py, produced by
 * transformers' apply_chat_template and render_jinja_template) and compares the prompt text
 * exactly, or checks that we fail where Python fails. The four tokenizer templates are read from
 * .cache/tokenizers (fetched by scripts/fetch-tokenizers.sh; the test fails if they are missing);
 * the eleven vLLM example templates from the test resources.
 */
class ChatTemplateGoldenTest {
  private static final List<String> TOKENIZERS = List.of("qwen3", "llama3_1", "deepseek_v3", "gemma3");
  private static final List<String> EXAMPLES = List.of("template_chatml", "tool_chat_template_deepseekv31",
      "tool_chat_template_gemma3_pythonic", "tool_chat_template_granite", "tool_chat_template_hermes",
      "tool_chat_template_llama3.1_json", "tool_chat_template_llama3.2_pythonic", "tool_chat_template_llama4_pythonic",
      "tool_chat_template_mistral3", "tool_chat_template_phi4_mini", "tool_chat_template_qwen3coder");
  /** Python exception classes we reproduce one to one. */
  private static final Set<String> SAME_TYPE = Set.of("UndefinedError", "TypeError", "ValueError", "TemplateError",
      "RecursionError", "SecurityError");

  @TestFactory
  Stream<DynamicNode> tokenizerTemplates() {
    List<DynamicNode> out = new ArrayList<>();
    for (String name : TOKENIZERS) {
      JsonNode doc = GoldenFixtures.read("tokenizer_" + name + ".json");
      Path config = GoldenFixtures.root().resolve(".cache/tokenizers/" + name + "/tokenizer_config.json");
      if (!Files.isRegularFile(config)) {
        throw new IllegalStateException("missing " + config + ": run scripts/fetch-tokenizers.sh (CI fetches it)");
      }
      TokenizerChatConfig tc = TokenizerChatConfig.load(config);
      ChatTemplate template = ChatTemplate.compile(tc.select(false));
      List<DynamicNode> tests = new ArrayList<>();
      tests.add(DynamicTest.dynamicTest("template is the one the fixture was made from", () ->
          assertThat(template.sha256()).isEqualTo(doc.get("template_sha256").asText())));
      tests.add(DynamicTest.dynamicTest("special tokens equal transformers' special_tokens_map", () ->
          assertThat(tc.specialTokens().tokens()).isEqualTo(stringMap(doc.get("special_tokens")))));
      tests.addAll(cases(doc, new ChatTemplateRenderer(template, tc.specialTokens(), GoldenFixtures.ENV), 40));
      out.add(DynamicContainer.dynamicContainer(name, tests));
    }
    return out.stream();
  }

  @TestFactory
  Stream<DynamicNode> vllmExampleTemplates() {
    List<DynamicNode> out = new ArrayList<>();
    for (String name : EXAMPLES) {
      JsonNode doc = GoldenFixtures.read("vllm_" + name + ".json");
      String source = GoldenFixtures.readString(GoldenFixtures.fixture("vllm_examples/" + name + ".jinja"));
      ChatTemplate template = ChatTemplate.compile(source);
      SpecialTokens special = new SpecialTokens(stringMap(doc.get("special_tokens")));
      out.add(DynamicContainer.dynamicContainer(name,
          cases(doc, new ChatTemplateRenderer(template, special, GoldenFixtures.ENV), 20)));
    }
    return out.stream();
  }

  /** Seeded random conversations (scripts/fixtures/chat_templates_random.py) over all 15 templates. */
  @TestFactory
  Stream<DynamicNode> randomConversations() {
    List<DynamicNode> out = new ArrayList<>();
    for (JsonNode t : GoldenFixtures.read("random_conversations.json")) {
      String ref = t.get("template").asText();
      String source;
      if (ref.startsWith("tokenizer:")) {
        Path config = GoldenFixtures.root().resolve(".cache/tokenizers/" + ref.substring("tokenizer:".length())
            + "/tokenizer_config.json");
        if (!Files.isRegularFile(config)) {
          throw new IllegalStateException("missing " + config + ": run scripts/fetch-tokenizers.sh (CI fetches it)");
        }
        source = TokenizerChatConfig.load(config).select(false);
      } else {
        source = GoldenFixtures.readString(GoldenFixtures.fixture(ref));
      }
      ChatTemplateRenderer renderer = new ChatTemplateRenderer(ChatTemplate.compile(source),
          new SpecialTokens(stringMap(t.get("special_tokens"))), GoldenFixtures.ENV);
      List<DynamicNode> tests = new ArrayList<>();
      int i = 0;
      for (JsonNode c : t.get("cases")) {
        tests.add(DynamicTest.dynamicTest("random #" + i++, () -> check(renderer, c)));
      }
      out.add(DynamicContainer.dynamicContainer(ref, tests));
    }
    assertThat(out).hasSize(15);
    return out.stream();
  }

  private static List<DynamicNode> cases(JsonNode doc, ChatTemplateRenderer renderer, int minRendered) {
    List<DynamicNode> tests = new ArrayList<>();
    ContentFormat expectedFormat = ContentFormat.valueOf(doc.get("content_format").asText().toUpperCase());
    tests.add(DynamicTest.dynamicTest("content format detected like vLLM", () ->
        assertThat(ContentFormat.detect(renderer.template())).isEqualTo(expectedFormat)));
    int successes = 0;
    for (JsonNode c : doc.get("cases")) {
      if (c.has("text")) {
        successes++;
      }
      tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> check(renderer, c)));
      if (c.has("request")) {
        tests.add(DynamicTest.dynamicTest(c.get("name").asText() + " (from the OpenAI request, through vLLM's steps)",
            () -> checkRequest(renderer, expectedFormat, c)));
      }
    }
    assertThat(successes).as("conversations Python renders").isGreaterThanOrEqualTo(minRendered);
    return tests;
  }

  static ChatTemplateInput input(JsonNode c) {
    JsonNode cfm = c.get("continue_final_message");
    String field = cfm.isTextual() ? cfm.asText() : (cfm.asBoolean() ? "content" : null);
    JsonNode docsNode = c.has("documents") ? c.get("documents") : null;
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> messages = (List<Map<String, Object>>) (List<?>) GoldenFixtures.toList(c.get("messages"));
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> tools = (List<Map<String, Object>>) (List<?>) GoldenFixtures.toList(c.get("tools"));
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> docs = (List<Map<String, Object>>) (List<?>) GoldenFixtures.toList(docsNode);
    return new ChatTemplateInput(messages, tools, docs, c.get("add_generation_prompt").asBoolean(), field,
        GoldenFixtures.toMap(c.get("kwargs")));
  }

  private static void check(ChatTemplateRenderer renderer, JsonNode c) {
    String actual;
    try {
      actual = renderer.render(input(c));
    } catch (TemplateException e) {
      if (c.has("text")) {
        fail("Python rendered this conversation but we raised " + e.pythonType() + ": " + e.getMessage());
      }
      checkError(c.get("error"), e);
      return;
    }
    if (!c.has("text")) {
      fail("Python raised " + c.get("error").get("type").asText() + " (" + c.get("error").get("message").asText()
          + ") but we rendered");
    }
    String expected = c.get("text").asText();
    if (!expected.equals(actual)) {
      fail(GoldenFixtures.firstDifference(expected, actual));
    }
  }

  private static void checkError(JsonNode error, TemplateException e) {
    String type = error.get("type").asText();
    if (SAME_TYPE.contains(type)) {
      assertThat(e.pythonType()).as(e.getMessage()).isEqualTo(type);
    }
    if (type.equals("TemplateError")) {
      assertThat(e).isInstanceOf(RaisedTemplateException.class);
      if (((RaisedTemplateException) e).hasLiteralMessage()) {
        assertThat(e.getMessage()).contains(error.get("message").asText());
      }
    }
  }

  /** The OpenAI request form of a case goes through vLLM's preprocessing to the same messages and prompt. */
  private static void checkRequest(ChatTemplateRenderer renderer, ContentFormat format, JsonNode c) {
    JsonNode req = c.get("request");
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> messages = (List<Map<String, Object>>) (List<?>) GoldenFixtures.toList(req.get("messages"));
    List<Map<String, Object>> conversation = new VllmChatPreprocessor(format).conversation(messages);
    JsonNode actualMessages = GoldenFixtures.JSON.valueToTree(conversation);
    assertThat(actualMessages).isEqualTo(c.get("messages"));
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> tools = (List<Map<String, Object>>) (List<?>) GoldenFixtures.toList(req.get("tools"));
    boolean agp = !req.has("add_generation_prompt") || req.get("add_generation_prompt").asBoolean();
    ChatRequestFields fields = new ChatRequestFields(messages, tools, null, agp, false, null, null, null);
    VllmChatRenderer vllm = VllmChatRenderer.withDefaults(renderer);
    if (c.has("text")) {
      String actual = vllm.render(fields);
      if (!c.get("text").asText().equals(actual)) {
        fail(GoldenFixtures.firstDifference(c.get("text").asText(), actual));
      }
    } else {
      try {
        vllm.render(fields);
        fail("Python raised but we rendered");
      } catch (TemplateException e) {
        checkError(c.get("error"), e);
      }
    }
  }

  private static Map<String, String> stringMap(JsonNode node) {
    Map<String, String> m = new LinkedHashMap<>();
    node.properties().forEach(e -> m.put(e.getKey(), e.getValue().asText()));
    return m;
  }
}
