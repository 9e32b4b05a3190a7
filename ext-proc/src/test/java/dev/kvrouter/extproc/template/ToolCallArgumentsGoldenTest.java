package dev.kvrouter.extproc.template;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * One replayed assistant tool call through {@link VllmChatPreprocessor}, against
 * tool_call_arguments.json (scripts/fixtures/chat_templates.py: vLLM 0.33.0's _postprocess_messages
 * over the real json.loads, the arguments printed by jinja2 as {@code {{ a | tojson }}|{{ a }}}).
 */
class ToolCallArgumentsGoldenTest {
  private static final ChatTemplate SHOW = ChatTemplate.compile("{{ a | tojson }}|{{ a }}");

  @TestFactory
  Stream<DynamicTest> argumentsBecomeWhatVllmHandsTheTemplate() {
    JsonNode doc = GoldenFixtures.read("tool_call_arguments.json");
    List<DynamicTest> tests = new ArrayList<>();
    int i = 0;
    for (JsonNode c : doc.get("cases")) {
      String shown = c.get("tool_call").toString();
      String name = String.format("%02d %s", i++, shown.length() > 70 ? shown.substring(0, 70) + "..." : shown);
      tests.add(DynamicTest.dynamicTest(name, () -> check(c)));
    }
    assertThat(tests).hasSizeGreaterThan(20);
    return tests.stream();
  }

  @SuppressWarnings("unchecked")
  private static void check(JsonNode c) {
    Map<String, Object> message = new LinkedHashMap<>();
    message.put("role", "assistant");
    message.put("content", null);
    message.put("tool_calls", GoldenFixtures.toList(GoldenFixtures.JSON.createArrayNode().add(c.get("tool_call"))));
    VllmChatPreprocessor pre = new VllmChatPreprocessor(ContentFormat.STRING);
    if (c.has("error")) {
      String type = c.get("error").get("type").asText();
      assertThatThrownBy(() -> pre.conversation(List.of(message)))
          .isInstanceOfSatisfying(ChatInputException.class, e -> {
            if (!type.equals("VLLMValidationError")) {
              assertThat(e.pythonType()).isEqualTo(type);
            }
          });
      return;
    }
    List<Map<String, Object>> out = pre.conversation(List.of(message));
    Map<String, Object> call = (Map<String, Object>) ((List<Object>) out.get(0).get("tool_calls")).get(0);
    Map<String, Object> ctx = new HashMap<>();
    ctx.put("a", ((Map<String, Object>) call.get("function")).get("arguments"));
    assertThat(SHOW.render(ctx, GoldenFixtures.ENV)).isEqualTo(c.get("text").asText());
  }
}
