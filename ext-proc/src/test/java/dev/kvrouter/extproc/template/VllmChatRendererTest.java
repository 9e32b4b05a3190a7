package dev.kvrouter.extproc.template;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** How vLLM's OpenAI server turns request fields into apply_chat_template arguments. */
class VllmChatRendererTest {
  private static final String TEMPLATE = "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
      + "{% if enable_thinking is defined %}think={{ enable_thinking }}{% endif %}"
      + "{% if tools %}tools={{ tools | length }}{% endif %}{% if add_generation_prompt %}<gen>{% endif %}"
      + "{{ reasoning_effort }}";

  private static VllmChatRenderer vllm(Map<String, ?> defaults, boolean excludeToolsOnNone) {
    ChatTemplateRenderer r = new ChatTemplateRenderer(ChatTemplate.compile(TEMPLATE), SpecialTokens.none(),
        GoldenFixtures.ENV);
    return new VllmChatRenderer(r, "auto", Map.of(), defaults, excludeToolsOnNone);
  }

  private static final List<Map<String, Object>> MESSAGES = List.of(Map.of("role", "user", "content", "hi"));
  private static final List<Map<String, Object>> TOOLS = List.of(Map.of("type", "function", "function",
      Map.of("name", "f")));

  @Test
  void requestFieldsWinOverChatTemplateKwargsAndServerDefaults() {
    var fields = new ChatRequestFields(MESSAGES, null, null, false, false, null,
        Map.of("add_generation_prompt", true, "enable_thinking", false), "high");
    var v = vllm(Map.of("enable_thinking", true), false);
    assertThat(v.render(fields)).isEqualTo("[user:hi]think=Falsehigh");
  }

  @Test
  void serverDefaultsApplyWhenTheRequestIsSilentOrAuto() {
    var v = vllm(Map.of("enable_thinking", true), false);
    assertThat(v.render(ChatRequestFields.of(MESSAGES))).isEqualTo("[user:hi]think=True<gen>");
    var auto = new ChatRequestFields(MESSAGES, null, null, true, false, null, Map.of("enable_thinking", "auto"), null);
    assertThat(v.render(auto)).isEqualTo("[user:hi]think=True<gen>");
  }

  @Test
  void kwargsTheTemplateNeverReadsAreDropped() {
    var fields = new ChatRequestFields(MESSAGES, null, null, true, false, null, Map.of("unused", 1, "enable_thinking",
        true, "return_dict", true), null);
    assertThat(vllm(Map.of(), false).templateInput(fields).kwargs()).containsOnlyKeys("enable_thinking");
  }

  @Test
  void reservedAndTokenizationKwargsAreRefused() {
    for (var bad : List.of(Map.of("chat_template", "x"), Map.of("tokenize", true), Map.of("tools", List.of()),
        Map.of("truncation", true), Map.of("sanitize_control_tokens", true))) {
      var fields = new ChatRequestFields(MESSAGES, null, null, true, false, null, bad, null);
      assertThatThrownBy(() -> vllm(Map.of(), false).render(fields)).as("%s", bad)
          .isInstanceOf(ChatInputException.class);
    }
  }

  @Test
  void emptyToolListsAndToolChoiceNoneCanDropTools() {
    assertThat(vllm(Map.of(), false).render(new ChatRequestFields(MESSAGES, List.of(), null, true, false, null, null,
        null))).isEqualTo("[user:hi]<gen>");
    assertThat(vllm(Map.of(), false).render(new ChatRequestFields(MESSAGES, TOOLS, "none", true, false, null, null,
        null))).isEqualTo("[user:hi]tools=1<gen>");
    assertThat(vllm(Map.of(), true).render(new ChatRequestFields(MESSAGES, TOOLS, "none", true, false, null, null,
        null))).isEqualTo("[user:hi]<gen>");
  }

  @Test
  void continueFinalMessageCutsThePrompt() {
    var fields = new ChatRequestFields(List.of(Map.of("role", "user", "content", "q"),
        Map.of("role", "assistant", "content", "partial ans")), null, null, false, true, null, null, null);
    assertThat(vllm(Map.of(), false).render(fields)).isEqualTo("[user:q][assistant:partial ans");
  }
}
