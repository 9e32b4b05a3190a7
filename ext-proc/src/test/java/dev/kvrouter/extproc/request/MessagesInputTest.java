package dev.kvrouter.extproc.request;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.kvrouter.extproc.model.InlineSystemMode;
import dev.kvrouter.extproc.model.MessagesDialect;
import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The Anthropic Messages-to-chat conversion, one vLLM rule per test (vllm/entrypoints/anthropic/serving.py and
 * inline_system.py); scripts/fixtures/messages_templates.py checks whole prompts against the real templates.
 */
class MessagesInputTest {

  private static InferenceRequest parse(String fields, InlineSystemMode mode) throws Exception {
    byte[] b = ("{\"model\":\"m\",\"max_tokens\":16," + fields + "}").getBytes(StandardCharsets.UTF_8);
    MessagesDialect dialect = MessagesDialect.DEFAULT.withInlineSystem(mode);
    return new RequestBodyParser().parse(Kind.MESSAGES, b, b.length, m -> dialect);
  }

  private static List<Map<String, Object>> messages(String fields, InlineSystemMode mode) throws Exception {
    InferenceRequest r = parse(fields, mode);
    assertThat(r.unreproducible()).isNull();
    return r.chat().messages();
  }

  private static OpenAiError error(String fields) {
    return Refusals.of(() -> parse(fields, InlineSystemMode.PRESERVE), fields);
  }

  /** The top-level system (blocks joined, Claude Code's billing header dropped) leads, then leading system messages. */
  @Test
  void systemBlocksAndLeadingSystemMessagesMakeOneSystemMessage() throws Exception {
    String body = "\"system\":[{\"type\":\"text\",\"text\":\"x-anthropic-billing-header: cch=1;\"},"
        + "{\"type\":\"text\",\"text\":\"A\"},{\"type\":\"text\",\"text\":\"B\"}],"
        + "\"messages\":[{\"role\":\"system\",\"content\":\"C\"},{\"role\":\"user\",\"content\":\"hi\"}]";
    for (InlineSystemMode mode : new InlineSystemMode[] {InlineSystemMode.PRESERVE, InlineSystemMode.FOLD}) {
      assertThat(messages(body, mode)).as(mode.name()).containsExactly(
          Map.of("role", "system", "content", "AB\n\nC"), Map.of("role", "user", "content", "hi"));
    }
  }

  /**
   * An inline system message stays a system turn where the template marks it, and is folded into the user turn
   * before it otherwise; one between a tool use and its result waits until after the result.
   */
  @Test
  void inlineSystemMessagesArePlacedByTheTemplatesMode() throws Exception {
    String body = "\"system\":\"S\",\"messages\":["
        + "{\"role\":\"user\",\"content\":\"q\"},"
        + "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}]},"
        + "{\"role\":\"system\",\"content\":\"R\"},"
        + "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\",\"content\":\"out\"}]}]";
    List<Map<String, Object>> kept = messages(body, InlineSystemMode.PRESERVE);
    assertThat(kept).extracting(m -> m.get("role")).containsExactly("system", "user", "assistant", "tool", "system");
    assertThat(kept.get(4).get("content")).isEqualTo("R");
    List<Map<String, Object>> folded = messages(body, InlineSystemMode.FOLD);
    // folded into the only-tool-results user message: onto its last result, so no user turn is added
    assertThat(folded).extracting(m -> m.get("role")).containsExactly("system", "user", "assistant", "tool");
    assertThat(folded.get(3).get("content")).isEqualTo("out\n\nR");
  }

  /**
   * Folding joined each system message onto the text gathered so far, copying it every time: 100,000 one-letter
   * system messages after a user turn (3.4 MB, under the default body limit) held a routing thread for 12 s. Each
   * run of system messages is now joined once, to the same text.
   */
  @Test
  void claudeCodesCtxAndMsgRolesAreReadAsUser() throws Exception {
    // vLLM's open PR 44737 maps them to user; a stock vLLM refuses them itself, so the router must not refuse a
    // request a worker carrying the mapping serves
    for (String role : new String[] {"ctx", "msg"}) {
      assertThat(messages("\"messages\":[{\"role\":\"" + role + "\",\"content\":\"c\"},"
          + "{\"role\":\"user\",\"content\":\"q\"}]", InlineSystemMode.PRESERVE)).as(role)
          .isEqualTo(messages("\"messages\":[{\"role\":\"user\",\"content\":\"c\"},"
              + "{\"role\":\"user\",\"content\":\"q\"}]", InlineSystemMode.PRESERVE));
    }
  }

  @Test
  void aLongRunOfSystemMessagesIsFoldedInLinearTime() {
    int n = 100_000;
    String run = ",{\"role\":\"system\",\"content\":\"x\"}".repeat(n);
    String folded = "\n\nx".repeat(n);
    String[] users = {"\"a\"", "[{\"type\":\"tool_result\",\"tool_use_id\":\"t\",\"content\":\"r\"},"
        + "{\"type\":\"text\",\"text\":\"a\"}]"};
    for (String user : users) {
      List<Map<String, Object>> out = assertTimeoutPreemptively(Duration.ofSeconds(5), () -> messages(
          "\"system\":\"S\",\"messages\":[{\"role\":\"user\",\"content\":" + user + "}" + run + "]",
          InlineSystemMode.FOLD));
      assertThat(out.get(out.size() - 1)).isEqualTo(Map.of("role", "user", "content", "a" + folded));
    }
    List<Map<String, Object>> leading = assertTimeoutPreemptively(Duration.ofSeconds(5),
        () -> messages("\"messages\":[" + run.substring(1) + ",{\"role\":\"user\",\"content\":\"a\"}]",
            InlineSystemMode.FOLD));
    assertThat(leading.get(0).get("content")).isEqualTo(folded.substring(2));
  }

  /**
   * vLLM before its template probe: the top-level system and every system message, wherever it stands, joined
   * without a separator into the leading system message (text blocks lose the billing header).
   */
  @Test
  void mergeJoinsEverySystemMessageIntoTheSystemPrompt() throws Exception {
    List<Map<String, Object>> out = messages("\"system\":[{\"type\":\"text\",\"text\":\"You are Claude Code. \"},"
        + "{\"type\":\"text\",\"text\":\"x-anthropic-billing-header: cch=1;\"}],\"messages\":["
        + "{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"system\",\"content\":\" Plan mode is off.\"},"
        + "{\"role\":\"assistant\",\"content\":\"b\"},{\"role\":\"user\",\"content\":\"c\"}]",
        InlineSystemMode.MERGE);
    assertThat(out).containsExactly(Map.of("role", "system", "content", "You are Claude Code.  Plan mode is off."),
        Map.of("role", "user", "content", "a"), Map.of("role", "assistant", "content", "b"),
        Map.of("role", "user", "content", "c"));
  }

  /** Without a system prompt, inline system messages are folded even where the template would keep them. */
  @Test
  void withoutASystemPromptInlineSystemMessagesFold() throws Exception {
    List<Map<String, Object>> out = messages("\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
        + "{\"role\":\"assistant\",\"content\":\"b\"},{\"role\":\"system\",\"content\":\"N\"},"
        + "{\"role\":\"user\",\"content\":\"c\"}]", InlineSystemMode.PRESERVE);
    assertThat(out).containsExactly(Map.of("role", "user", "content", "a"),
        Map.of("role", "assistant", "content", "b"), Map.of("role", "user", "content", "N\n\nc"));
  }

  /** Thinking becomes reasoning, tool uses calls with their input as arguments, a user's tool results tool messages. */
  @Test
  void blocksBecomeReasoningToolCallsAndToolMessages() throws Exception {
    List<Map<String, Object>> out = messages("\"messages\":[{\"role\":\"assistant\",\"content\":["
        + "{\"type\":\"thinking\",\"thinking\":\"hm\",\"signature\":\"s\"},{\"type\":\"redacted_thinking\","
        + "\"data\":\"x\"},{\"type\":\"text\",\"text\":\"ok\"},"
        + "{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{\"a\":1}}]},"
        + "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\",\"content\":"
        + "[{\"type\":\"text\",\"text\":\"l1\"},{\"type\":\"text\",\"text\":\"l2\"}]},"
        + "{\"type\":\"text\",\"text\":\"go\"}]}]",
        InlineSystemMode.PRESERVE);
    assertThat(out).hasSize(3);
    assertThat(out.get(0)).containsEntry("reasoning", "hm").containsEntry("content", "ok");
    assertThat(out.get(0).get("tool_calls")).isEqualTo(List.of(
        Map.of("id", "t1", "type", "function", "function", Map.of("name", "f", "arguments", Map.of("a", 1L)))));
    assertThat(out.get(1)).isEqualTo(Map.of("role", "tool", "content", "l1\nl2", "tool_call_id", "t1"));
    assertThat(out.get(2)).isEqualTo(Map.of("role", "user", "content", "go"));
  }

  /** Tools become chat function tools; tool choice any is required; output effort and disabled thinking apply. */
  @Test
  void toolsChoiceAndEffort() throws Exception {
    InferenceRequest r = parse("\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
        + "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"properties\":{}}}],\"tool_choice\":{\"type\":\"any\"},"
        + "\"output_config\":{\"effort\":\"high\"}", InlineSystemMode.PRESERVE);
    ChatPrompt chat = r.chat();
    assertThat(chat.toolChoice()).isEqualTo("required");
    assertThat(chat.reasoningEffort()).isEqualTo("high");
    Map<?, ?> fn = (Map<?, ?>) chat.tools().get(0).get("function");
    assertThat(fn.get("name")).isEqualTo("f");
    assertThat(fn.get("parameters")).isEqualTo(Map.of("properties", Map.of(), "type", "object"));
    assertThat(chat.chatTemplateKwargs()).as("an effort turns thinking on").containsEntry("enable_thinking", true);
    ChatPrompt disabled = parse("\"messages\":[],\"thinking\":{\"type\":\"disabled\"},"
        + "\"output_config\":{\"effort\":\"high\"}", InlineSystemMode.PRESERVE).chat();
    assertThat(disabled.reasoningEffort()).isEqualTo("none");
    assertThat(disabled.chatTemplateKwargs()).containsEntry("enable_thinking", false);
    assertThat(parse("\"messages\":[],\"thinking\":{\"type\":\"disabled\"},"
        + "\"chat_template_kwargs\":{\"enable_thinking\":true}", InlineSystemMode.PRESERVE).chat()
        .chatTemplateKwargs()).as("the client's own switch stays").containsEntry("enable_thinking", true);
    assertThat(parse("\"messages\":[],\"tools\":[{\"name\":\"f\",\"input_schema\":{}}]", InlineSystemMode.PRESERVE)
        .chat().toolChoice()).as("tools without a choice").isEqualTo("auto");
  }

  /**
   * AnthropicTool.validate_input_schema adds {@code "type": "object"} only to a schema without the key: a null type
   * reaches the template as null (found by messages_random.py).
   */
  @Test
  void anInputSchemaWithANullTypeKeepsIt() throws Exception {
    ChatPrompt chat = parse("\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
        + "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":null,\"properties\":{}}}]",
        InlineSystemMode.PRESERVE).chat();
    Map<?, ?> parameters = (Map<?, ?>) ((Map<?, ?>) chat.tools().get(0).get("function")).get("parameters");
    assertThat(parameters.containsKey("type")).isTrue();
    assertThat(parameters.get("type")).isNull();
    assertThat(parameters.keySet()).hasToString("[type, properties]");
  }

  /** A template that ignores "none" gets vLLM's "low" for disabled thinking, as the model's probe decided. */
  @Test
  void disabledThinkingSendsTheProbedEffort() throws Exception {
    byte[] b = "{\"model\":\"m\",\"max_tokens\":16,\"messages\":[],\"thinking\":{\"type\":\"disabled\"}}"
        .getBytes(StandardCharsets.UTF_8);
    ChatPrompt chat = new RequestBodyParser().parse(Kind.MESSAGES, b, b.length,
        m -> new MessagesDialect(InlineSystemMode.PRESERVE, "low")).chat();
    assertThat(chat.reasoningEffort()).isEqualTo("low");
    assertThat(chat.chatTemplateKwargs()).containsEntry("enable_thinking", true);
  }

  /**
   * Folding a system message onto a tool result joins it to the last item's {@code text or ""}: a truthy non-string
   * there fails vLLM's {@code _join} (a 500), so the router has no prompt either; a falsy one reads as "" (found by
   * messages_random.py).
   */
  @Test
  void foldingOntoAToolResultWithNonStringTextFailsAsInVllm() throws Exception {
    String body = "\"system\":\"S\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
        + "\"tool_use_id\":\"t\",\"content\":[{\"type\":\"text\",\"text\":%s}]}]},"
        + "{\"role\":\"system\",\"content\":\"R\"}]";
    assertThat(Refusals.of(() -> parse(body.formatted("5"), InlineSystemMode.FOLD), body).param())
        .isEqualTo("messages");
    assertThat(messages(body.formatted("0"), InlineSystemMode.FOLD).get(1))
        .isEqualTo(Map.of("role", "tool", "tool_call_id", "t", "content", "R"));
  }

  /** An image is not hashed on this path: the request is routed by load, with the reason. */
  @Test
  void anImageLeavesThePromptUnreproduced() throws Exception {
    InferenceRequest r = parse("\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":"
        + "{\"type\":\"url\",\"url\":\"http://x/y.png\"}},{\"type\":\"text\",\"text\":\"what is it\"}]}]",
        InlineSystemMode.PRESERVE);
    assertThat(r.unreproducible()).isEqualTo(InferenceRequest.MESSAGES_MEDIA);
  }

  /**
   * In a tool result, vLLM's {@code _convert_image_source_to_url} turns every image source into a URL (a data: URL
   * when it is not a "url" one, even empty) except a "url" source without its url, which adds no image: that result
   * is text only and hashed (found by messages_random.py).
   */
  @Test
  void aToolResultImageIsMediaUnlessItsUrlSourceHasNoUrl() throws Exception {
    String body = "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\","
        + "\"content\":[{\"type\":\"text\",\"text\":\"out\"},{\"type\":\"image\"%s}]}]}]";
    for (String src : new String[] {",\"source\":{\"type\":\"url\",\"url\":\"\"}", ",\"source\":{\"type\":\"url\"}"}) {
      assertThat(messages(body.formatted(src), InlineSystemMode.PRESERVE)).as(src)
          .containsExactly(Map.of("role", "tool", "tool_call_id", "t", "content", "out"));
    }
    for (String src : new String[] {",\"source\":{\"type\":\"url\",\"url\":\"http://x/y.png\"}", ",\"source\":{}",
        ""}) {
      assertThat(parse(body.formatted(src), InlineSystemMode.PRESERVE).unreproducible()).as(src)
          .isEqualTo(InferenceRequest.MESSAGES_MEDIA);
    }
  }

  /** What pydantic's request models refuse is a 400 naming the field. */
  @Test
  void malformedRequestsAreRefusedNamingTheField() {
    assertThat(error("\"system\":\"s\"").param()).isEqualTo("messages");
    assertThat(error("\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]").param()).isEqualTo("messages[0].role");
    assertThat(error("\"messages\":[{\"content\":\"x\"}]").param()).as("no role (was a 500: Map.of looked null up)")
        .isEqualTo("messages[0].role");
    assertThat(error("\"messages\":[{\"role\":\"user\",\"content\":5}]").param()).isEqualTo("messages[0].content");
    assertThat(error("\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"video\"}]}]").param())
        .isEqualTo("messages[0].content[0].type");
    assertThat(error("\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_use\",\"input\":[1]}]}]")
        .param()).isEqualTo("messages[0].content[0].input");
    assertThat(error("\"messages\":[],\"tools\":[{\"name\":\"f\"}]").param()).isEqualTo("tools[0].input_schema");
    assertThat(error("\"messages\":[],\"tool_choice\":{\"type\":\"tool\"}").param()).isEqualTo("tool_choice.name");
    assertThat(error("\"messages\":[],\"thinking\":{\"type\":\"on\"}").param()).isEqualTo("thinking.type");
    assertThat(error("\"messages\":[],\"output_config\":{\"effort\":\"huge\"}").param())
        .isEqualTo("output_config.effort");
    assertThat(error("\"messages\":[],\"system\":[{\"type\":\"text\",\"text\":3}]").param())
        .isEqualTo("system[0].text");
  }
}
