package dev.kvrouter.extproc.template;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * vLLM's message preprocessing. Expectations are read off vllm/entrypoints/chat_utils.py
 * (_parse_chat_message_content, _parse_chat_message_content_part(s), _postprocess_messages; in
 * vllm/renderers/chat_utils/chat_message.py as of 0.33.0, with _strip_claude_code_billing_header) and
 * the pydantic model_dump of ChatCompletionToolsParam; vLLM itself cannot run here.
 */
class VllmChatPreprocessorTest {
  private static final VllmChatPreprocessor STRING = new VllmChatPreprocessor(ContentFormat.STRING);
  private static final VllmChatPreprocessor OPENAI = new VllmChatPreprocessor(ContentFormat.OPENAI);

  private static Map<String, Object> map(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  private static Map<String, Object> text(String t) {
    return map("type", "text", "text", t);
  }

  @Test
  void stringFormatJoinsTextPartsWithNewlines() {
    var out = STRING.conversation(List.of(
        map("role", "user", "content", List.of(text("a"), "raw string part", map("type", "input_text", "text", "b"),
            map("type", "refusal", "refusal", "c"), map("type", "thinking", "thinking", "d")))));
    assertThat(out).containsExactly(map("role", "user", "content", "a\nraw string part\nb\nc\nd"));
  }

  @Test
  void openaiFormatWrapsEveryContentAsParts() {
    var out = OPENAI.conversation(List.of(
        map("role", "system", "content", "plain"),
        map("role", "user", "content", List.of(map("type", "image_url", "image_url", map("url", "http://x/i.png")),
            text("what?"), map("type", "input_audio", "input_audio", map("data", "AA==", "format", "wav")),
            map("type", "video_url", "video_url", map("url", "http://x/v.mp4")))),
        map("role", "assistant", "content", null)));
    assertThat(out).containsExactly(
        map("role", "system", "content", List.of(text("plain"))),
        map("role", "user", "content", List.of(map("type", "image"), text("what?"), map("type", "audio"),
            map("type", "video"))),
        map("role", "assistant", "content", List.of()));
  }

  @Test
  void nullContentBecomesEmptyStringInStringFormat() {
    var out = STRING.conversation(List.of(map("role", "assistant", "content", null)));
    assertThat(out.get(0)).containsEntry("content", "");
  }

  @Test
  void billingHeaderLeavesOnlySystemTextThatStartsWithIt() {
    String hdr = VllmChatPreprocessor.BILLING_HEADER + ": cch=1;";
    var out = OPENAI.conversation(List.of(map("role", "system", "content", List.of(
        map("type", "input_text", "text", hdr + "\nkept: not a text part"), " " + hdr + "\nkept: not at the start",
        hdr + "\r\nbare string part\nsecond line", map("type", "text", "text", hdr + "\n", "x", 1),
        map("text", hdr + "\nkept: untyped", "type", "text", "y", 2)))));
    // Only the first line goes; a part left empty goes too; other keys stay (and reach the template after the text).
    assertThat(out.get(0).get("content")).isEqualTo(List.of(text(hdr + "\nkept: not a text part"),
        text(" " + hdr + "\nkept: not at the start"), text("bare string part\nsecond line"),
        map("type", "text", "text", "kept: untyped", "y", 2)));
    assertThat(VllmChatPreprocessor.stripBillingHeader(List.of(map("text", hdr + "\nrest", "type", "text", "y", 2))))
        .isEqualTo(List.of(map("text", "rest", "type", "text", "y", 2)));
    assertThat(STRING.conversation(List.of(map("role", "user", "content", hdr + "\nHi"))).get(0))
        .containsEntry("content", hdr + "\nHi");
  }

  @Test
  void emptyPartsAreDroppedOnlyInStringFormat() {
    List<Object> parts = List.of("", text(""), text("a"), map("type", "tool_reference", "name", ""), text("b"));
    assertThat(STRING.conversation(List.of(map("role", "user", "content", parts))).get(0))
        .containsEntry("content", "a\nb");
    assertThat(OPENAI.conversation(List.of(map("role", "user", "content", parts))).get(0).get("content"))
        .isEqualTo(List.of(text(""), text(""), text("a"), map("type", "tool_reference", "name", ""), text("b")));
  }

  @Test
  void textPartsWithoutTextAreSkipped() {
    var out = STRING.conversation(List.of(map("role", "user", "content",
        Arrays.asList(map("type", "text", "text", null), text("kept")))));
    assertThat(out.get(0)).containsEntry("content", "kept");
  }

  @Test
  void toolResultsMadeOfTextPartsBecomeAString() {
    var out = OPENAI.conversation(List.of(
        map("role", "tool", "tool_call_id", "c1", "content", List.of(text("21C"), text("sunny"))),
        map("role", "tool", "tool_call_id", "c2", "content", List.of(text("x"), map("type", "tool_reference",
            "name", "search")))));
    assertThat(out.get(0)).isEqualTo(map("role", "tool", "content", "21C\nsunny", "tool_call_id", "c1"));
    assertThat(out.get(1).get("content")).isEqualTo(List.of(text("x"), map("type", "tool_reference", "name",
        "search")));
  }

  @Test
  void assistantKeepsToolCallsAndCopiesReasoning() {
    var out = STRING.conversation(List.of(map("role", "assistant", "content", "ok", "reasoning", "because",
        "reasoning_content", "ignored by vLLM", "tool_calls", List.of(map("id", "c", "type", "function", "function",
            map("name", "f", "arguments", "{\"b\": 2, \"a\": [1, 2.5, null]}"))))));
    Map<String, Object> m = out.get(0);
    assertThat(new ArrayList<Object>(m.keySet())).containsExactly("role", "content", "tool_calls", "reasoning",
        "reasoning_content");
    assertThat(m).containsEntry("reasoning", "because").containsEntry("reasoning_content", "because");
    @SuppressWarnings("unchecked")
    Map<String, Object> fn = (Map<String, Object>) ((Map<String, Object>) ((List<?>) m.get("tool_calls")).get(0))
        .get("function");
    assertThat(fn.get("arguments")).isEqualTo(map("b", 2, "a", Arrays.asList(1, 2.5, null)));
    assertThat(new ArrayList<Object>(((Map<?, ?>) fn.get("arguments")).keySet())).containsExactly("b", "a");
  }

  @Test
  void toolCallArgumentsFollowVllmRules() {
    List<Object> argsIn = Arrays.asList("not json", "", "  ", "[1, 2]", "\"str\"", "null", 5, null,
        map("already", "dict"), "{\"a\": 1} trailing");
    // vLLM 0.33.0: only a JSON object survives, any other value (a list too) becomes {}
    List<Object> expected = Arrays.asList(map(), map(), map(), map(), map(), map(), map(), map(),
        map("already", "dict"), map());
    for (int i = 0; i < argsIn.size(); i++) {
      var out = STRING.conversation(List.of(map("role", "assistant", "content", null, "tool_calls",
          List.of(map("id", "c", "type", "function", "function", map("name", "f", "arguments", argsIn.get(i)))))));
      @SuppressWarnings("unchecked")
      Map<String, Object> fn = (Map<String, Object>) ((Map<String, Object>) ((List<?>) out.get(0).get("tool_calls"))
          .get(0)).get("function");
      assertThat(fn.get("arguments")).as("arguments %s", argsIn.get(i)).isEqualTo(expected.get(i));
    }
  }

  @Test
  void emptyToolCallsAreDroppedAndNullToolCallsIgnored() {
    var out = STRING.conversation(List.of(map("role", "assistant", "content", "a", "tool_calls", List.of()),
        map("role", "assistant", "content", "b", "tool_calls", null)));
    assertThat(out.get(0)).doesNotContainKey("tool_calls");
    assertThat(out.get(1)).doesNotContainKey("tool_calls");
  }

  @Test
  void onlyKnownMessageKeysSurvive() {
    var out = STRING.conversation(List.of(
        map("role", "user", "content", "hi", "name", "alice", "extra", "dropped", "task", "t"),
        map("role", "user", "content", "hi", "name", 42),
        map("role", "developer", "content", "d", "tools", List.of(map("x", 1))),
        map("role", "tool", "content", "r", "tool_call_id", null)));
    assertThat(out.get(0)).isEqualTo(map("role", "user", "content", "hi", "name", "alice", "task", "t"));
    assertThat(out.get(1)).isEqualTo(map("role", "user", "content", "hi"));
    assertThat(out.get(2)).isEqualTo(map("role", "developer", "content", "d", "tools", List.of(map("x", 1))));
    assertThat(out.get(3)).containsEntry("tool_call_id", null);
  }

  @Test
  void untypedPartsAreRecognisedByTheirKey() {
    var out = OPENAI.conversation(List.of(map("role", "user", "content", List.of(map("image_url", "http://i"),
        map("type", "image_url", "image_url", map("url", "u"), "uuid", "abc")))));
    assertThat(out.get(0).get("content")).isEqualTo(List.of(map("type", "image"), map("type", "image")));
  }

  /** vLLM's video_embeds part is a video for the template, typed or recognised by its key. */
  @Test
  void videoEmbedsAreVideos() {
    var out = OPENAI.conversation(List.of(map("role", "user", "content", List.of(
        map("type", "video_embeds", "video_embeds", "id"), map("video_embeds", "id", "uuid", "v")))));
    assertThat(out.get(0).get("content")).isEqualTo(List.of(map("type", "video"), map("type", "video")));
    var string = new VllmChatPreprocessor(ContentFormat.STRING, Map.of("video", "<video>"));
    assertThat(string.conversation(List.of(map("role", "user", "content", List.of(
        map("type", "video_embeds", "video_embeds", "id"), text("what happens?"))))).get(0).get("content"))
        .isEqualTo("<video>\nwhat happens?");
  }

  /**
   * vLLM keeps a part's keys that no content-part type declares (_collect_extra_fields over
   * _KNOWN_CONTENT_PART_FIELDS) on the text and media dicts it hands an "openai"-format template, after type and
   * text: Anthropic-style cache_control reaches the template, which may print it. Declared keys (name, uuid,
   * closed, ...) do not; "string" format and tool references carry no extras.
   */
  @Test
  void undeclaredPartKeysReachOpenaiFormatTemplatesAsInVllm() {
    Map<String, Object> cc = map("type", "ephemeral");
    var out = OPENAI.conversation(List.of(map("role", "user", "content", List.of(
        map("cache_control", cc, "type", "text", "text", "cached", "name", "n"),
        map("type", "thinking", "thinking", "hm", "closed", true, "signature", "s"),
        map("type", "image_url", "image_url", map("url", "u", "detail", "low"), "cache_control", cc),
        map("type", "tool_reference", "name", "t", "cache_control", cc)))));
    assertThat(out.get(0).get("content")).isEqualTo(List.of(
        map("type", "text", "text", "cached", "cache_control", cc),
        map("type", "text", "text", "hm", "signature", "s"),
        map("type", "image", "cache_control", cc),
        map("type", "tool_reference", "name", "t")));
    assertThat(((Map<?, ?>) ((List<?>) out.get(0).get("content")).get(0)).keySet().toString())
        .isEqualTo("[type, text, cache_control]");
    assertThat(STRING.conversation(List.of(map("role", "user", "content", List.of(
        map("type", "text", "text", "cached", "cache_control", cc))))).get(0).get("content")).isEqualTo("cached");
  }

  @Test
  void badPartsFailLikeVllm() {
    assertThatThrownBy(() -> OPENAI.conversation(List.of(map("role", "user", "content", List.of(map("foo", 1))))))
        .isInstanceOf(ChatInputException.class).hasMessageContaining("Missing 'type'");
    assertThatThrownBy(() -> OPENAI.conversation(List.of(map("role", "user", "content",
        List.of(map("type", "hologram"))))))
        .isInstanceOf(ChatInputException.class).hasMessageContaining("Unsupported chat content part type");
  }

  @Test
  void stringFormatMediaNeedsAConfiguredPlaceholder() {
    var msg = List.of(map("role", "user", "content", List.of(map("type", "image_url", "image_url", map("url", "u")),
        text("what is it?"), map("type", "image_url", "image_url", map("url", "v")))));
    assertThatThrownBy(() -> STRING.conversation(msg)).isInstanceOf(ChatInputException.class);
    var withPlaceholder = new VllmChatPreprocessor(ContentFormat.STRING, Map.of("image", "<image>"));
    assertThat(withPlaceholder.conversation(msg).get(0).get("content")).isEqualTo("<image>\n<image>\nwhat is it?");
    var already = List.of(map("role", "user", "content", List.of(map("type", "image_url", "image_url",
        map("url", "u")), text("see <image> here"))));
    assertThat(withPlaceholder.conversation(already).get(0).get("content")).isEqualTo("see <image> here");
  }

  @Test
  void toolDictsLookLikePydanticModelDump() {
    var tools = VllmChatPreprocessor.toolDicts(List.of(
        map("type", "function", "function", map("name", "f")),
        map("function", map("name", "g", "parameters", map("type", "object"), "strict", true, "description", "d"),
            "extra", 1)));
    assertThat(tools.get(0)).isEqualTo(map("type", "function", "function",
        map("name", "f", "description", null, "parameters", null)));
    assertThat(new ArrayList<Object>(((Map<?, ?>) tools.get(1).get("function")).keySet()))
        .containsExactly("name", "description", "parameters", "strict");
    assertThat(new ArrayList<Object>(tools.get(1).keySet())).containsExactly("type", "function", "extra");
    assertThatThrownBy(() -> VllmChatPreprocessor.toolDicts(List.of(map("type", "retrieval"))))
        .isInstanceOf(ChatInputException.class);
  }

  @Test
  void inputsAreNotModified() {
    Map<String, Object> fn = map("name", "f", "arguments", "{\"a\": 1}");
    Map<String, Object> msg = map("role", "assistant", "content", null, "tool_calls",
        List.of(map("id", "c", "type", "function", "function", fn)));
    STRING.conversation(List.of(msg));
    assertThat(fn.get("arguments")).isEqualTo("{\"a\": 1}");
  }
}
