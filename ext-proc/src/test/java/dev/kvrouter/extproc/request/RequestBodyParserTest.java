package dev.kvrouter.extproc.request;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import dev.kvrouter.extproc.request.MultimodalItem.Modality;
import dev.kvrouter.extproc.request.RequestBodyParser.BadRequest;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

@SuppressWarnings("unchecked")
class RequestBodyParserTest {

  final RequestBodyParser parser = new RequestBodyParser();

  InferenceRequest parse(Kind kind, String json) throws BadRequest {
    byte[] b = json.getBytes(StandardCharsets.UTF_8);
    return parser.parse(kind, b, b.length);
  }

  OpenAiError error(Kind kind, String json) {
    BadRequest e = catchThrowableOfType(BadRequest.class, () -> parse(kind, json));
    assertThat(e).as("expected a 400 for %s", json).isNotNull();
    assertThat(e.error().status()).isEqualTo(400);
    return e.error();
  }

  static String chat(String rest) {
    return "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" + rest + "}";
  }

  @Nested
  class Completions {

    @Test
    void aStringPromptIsOneTextInput() throws Exception {
      InferenceRequest r = parse(Kind.COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"Hello\"}");
      assertThat(r.completion().inputs()).containsExactly(new CompletionPrompt.Text("Hello"));
      assertThat(r.completion().isBatch()).isFalse();
      assertThat(r.completion().addSpecialTokens()).isTrue(); // vLLM's completions default
      assertThat(r.output().maxTokens()).isEqualTo(16); // vLLM's completions default
      assertThat(r.unreproducible()).isNull();
    }

    @Test
    void aListOfStringsIsABatchInOrder() throws Exception {
      InferenceRequest r = parse(Kind.COMPLETIONS, "{\"model\":\"m\",\"prompt\":[\"a\",\"\",\"c\"]}");
      assertThat(r.completion().inputs()).containsExactly(new CompletionPrompt.Text("a"),
          new CompletionPrompt.Text(""), new CompletionPrompt.Text("c"));
      assertThat(r.completion().isBatch()).isTrue();
      assertThat(r.completion().first()).isEqualTo(new CompletionPrompt.Text("a"));
    }

    @Test
    void aListOfIntsIsOneTokenPrompt() throws Exception {
      InferenceRequest r = parse(Kind.COMPLETIONS, "{\"model\":\"m\",\"prompt\":[1, 2, 151643, 0, 2147483647]}");
      assertThat(r.completion().inputs()).containsExactly(
          new CompletionPrompt.Tokens(TokenIds.of(1, 2, 151643, 0, Integer.MAX_VALUE)));
    }

    @Test
    void aListOfTokenListsIsABatchOfTokenPrompts() throws Exception {
      InferenceRequest r = parse(Kind.COMPLETIONS, "{\"model\":\"m\",\"prompt\":[[1,2],[3],[4,5,6]]}");
      assertThat(r.completion().inputs()).containsExactly(new CompletionPrompt.Tokens(TokenIds.of(1, 2)),
          new CompletionPrompt.Tokens(TokenIds.of(3)), new CompletionPrompt.Tokens(TokenIds.of(4, 5, 6)));
    }

    @Test
    void integralFloatsAreTokenIdsAsPydanticsLaxIntAcceptsThem() throws Exception {
      InferenceRequest r = parse(Kind.COMPLETIONS, "{\"model\":\"m\",\"prompt\":[1.0, 2e0]}");
      assertThat(r.completion().inputs()).containsExactly(new CompletionPrompt.Tokens(TokenIds.of(1, 2)));
    }

    @Test
    void longTokenPromptsGrowPastTheInitialBuffer() throws Exception {
      StringBuilder sb = new StringBuilder("{\"model\":\"m\",\"prompt\":[");
      int n = 40_000;
      for (int i = 0; i < n; i++) {
        sb.append(i == 0 ? "" : ",").append(i * 7 % 150_000);
      }
      InferenceRequest r = parse(Kind.COMPLETIONS, sb.append("]}").toString());
      TokenIds ids = ((CompletionPrompt.Tokens) r.completion().first()).ids();
      assertThat(ids.size()).isEqualTo(n);
      assertThat(ids.get(n - 1)).isEqualTo((n - 1) * 7 % 150_000);
      int[] copy = new int[n + 2];
      ids.copyInto(copy, 2);
      assertThat(copy[2 + 12_345]).isEqualTo(12_345 * 7 % 150_000);
    }

    @Test
    void malformedPromptShapesAre400sNamingPrompt() {
      for (String bad : List.of("[]", "[\"a\", 1]", "[1, \"a\"]", "[[1], 2]", "[[1], [\"a\"]]", "[[]]", "[[1],[]]",
          "[-1]", "[1.5]", "[4294967296]", "[true]", "[null]", "{}", "42", "true", "[{\"x\":1}]", "[[[1]]]",
          "\"\"")) {
        OpenAiError e = error(Kind.COMPLETIONS, "{\"model\":\"m\",\"prompt\":" + bad + "}");
        assertThat(e.param()).as(bad).isEqualTo("prompt");
        assertThat(e.message()).as(bad).doesNotContain("\"a\"");
      }
    }

    @Test
    void aMissingOrNullPromptIs400ButPromptEmbedsAloneRoutesByLoad() throws Exception {
      assertThat(error(Kind.COMPLETIONS, "{\"model\":\"m\"}").param()).isEqualTo("prompt");
      assertThat(error(Kind.COMPLETIONS, "{\"model\":\"m\",\"prompt\":null}").param()).isEqualTo("prompt");
      assertThat(error(Kind.COMPLETIONS, "{\"model\":\"m\",\"prompt_embeds\":[]}").param()).isEqualTo("prompt");
      InferenceRequest r = parse(Kind.COMPLETIONS, "{\"model\":\"m\",\"prompt_embeds\":\"" + "QUFB".repeat(1000)
          + "\"}");
      assertThat(r.unreproducible()).isEqualTo("prompt_embeds");
      assertThat(r.completion().inputs()).isEmpty();
      InferenceRequest both = parse(Kind.COMPLETIONS,
          "{\"model\":\"m\",\"prompt\":\"x\",\"prompt_embeds\":[\"QUFB\"]}");
      assertThat(both.unreproducible()).isEqualTo("prompt_embeds");
    }

    @Test
    void chatFieldsAreIgnoredOnCompletionsAndViceVersa() throws Exception {
      InferenceRequest r = parse(Kind.COMPLETIONS,
          "{\"model\":\"m\",\"messages\":42,\"tools\":\"x\",\"prompt\":\"p\",\"add_generation_prompt\":\"maybe\"}");
      assertThat(r.completion().inputs()).hasSize(1);
      InferenceRequest c = parse(Kind.CHAT, chat(",\"prompt\":{\"bad\":1},\"prompt_embeds\":\"x\""));
      assertThat(c.unreproducible()).isNull();
    }
  }

  /** OpenAI's Responses API as vLLM's ResponsesRequest reads it (responses/protocol.py). */
  @Nested
  class Responses {

    @Test
    void isReadAsAChatPromptWithItsSaltStreamAndOutputCap() throws Exception {
      // `tools` has the Responses shape (flat), not chat's
      InferenceRequest r = parse(Kind.RESPONSES, "{\"model\":\"m\",\"input\":[{\"role\":\"user\","
          + "\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"}]}],\"instructions\":\"be brief\","
          + "\"tools\":[{\"type\":\"function\",\"name\":\"f\"}],"
          + "\"max_output_tokens\":\"12\",\"max_tokens\":99,\"stream\":\"true\",\"cache_salt\":\"s\"}");
      assertThat(r.kind()).isEqualTo(Kind.RESPONSES);
      assertThat(r.model()).isEqualTo("m");
      assertThat(r.cacheSalt()).isEqualTo("s");
      assertThat(r.stream()).isTrue();
      assertThat(r.maxTokens()).as("max_output_tokens, not max_tokens").isEqualTo(12);
      assertThat(r.unreproducible()).isNull();
      assertThat(r.chat().messages()).extracting(m -> m.get("role")).containsExactly("system", "user");
      assertThat(r.chat().tools()).hasSize(1);
      assertThat(r.saltSites().values()).hasSize(1);
      assertThat(parse(Kind.RESPONSES, "{\"model\":\"m\",\"input\":\"hi\"}").maxTokens())
          .as("no cap: up to the context").isEqualTo(-1);
    }

    @Test
    void aPromptTemplateIsRefusedAsVllmRefusesIt() {
      // ResponsesRequest.validate_prompt
      assertThat(error(Kind.RESPONSES, "{\"model\":\"m\",\"input\":\"hi\",\"prompt\":{\"id\":\"pmpt_1\"}}")
          .param()).isEqualTo("prompt");
      assertThat(error(Kind.RESPONSES, "{\"model\":\"m\"}").param()).isEqualTo("input");
    }

    @Test
    void itsSaltAndModelAreCheckedAsForChat() {
      assertThat(error(Kind.RESPONSES, "{\"model\":\"m\",\"input\":\"hi\",\"cache_salt\":\"\"}").param())
          .isEqualTo("cache_salt");
      assertThat(error(Kind.RESPONSES, "{\"input\":\"hi\"}").param()).isEqualTo("model");
    }
  }

  @Nested
  class Chat {

    @Test
    void messagesArePlainValuesInTheirOrder() throws Exception {
      InferenceRequest r = parse(Kind.CHAT, "{\"model\":\"m\",\"messages\":["
          + "{\"role\":\"system\",\"content\":\"You are terse.\"},"
          + "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},\"b\"],\"name\":\"bob\"},"
          + "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
          + "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}],\"reasoning_content\":\"hmm\"},"
          + "{\"role\":\"tool\",\"content\":\"42\",\"tool_call_id\":\"c1\"}]}");
      List<Map<String, Object>> m = r.chat().messages();
      assertThat(m).hasSize(4);
      assertThat(m.get(0)).containsExactly(Map.entry("role", "system"), Map.entry("content", "You are terse."));
      assertThat(m.get(1).keySet()).containsExactly("role", "content", "name");
      assertThat((List<Object>) m.get(1).get("content")).containsExactly(Map.of("type", "text", "text", "a"), "b");
      assertThat(m.get(2)).containsEntry("content", null).containsKey("tool_calls");
      assertThat(m.get(3)).containsEntry("tool_call_id", "c1");
      assertThatThrownBy(() -> m.get(0).put("x", 1)).isInstanceOf(UnsupportedOperationException.class);
      assertThatThrownBy(() -> ((List<Object>) m.get(1).get("content")).add(1))
          .isInstanceOf(UnsupportedOperationException.class);
      assertThat(r.multimodal()).isEmpty();
    }

    @Test
    void templateInputsTakeVllmsDefaults() throws Exception {
      ChatPrompt c = parse(Kind.CHAT, chat("")).chat();
      assertThat(c.addGenerationPrompt()).isTrue();
      assertThat(c.continueFinalMessage()).isFalse();
      assertThat(c.addSpecialTokens()).isFalse();
      assertThat(c.tools()).isNull();
      assertThat(c.toolChoice()).isNull();
      assertThat(c.documents()).isNull();
      assertThat(c.chatTemplateKwargs()).isEmpty();
      assertThat(c.templateKwargs()).containsExactly(Map.entry("add_generation_prompt", true),
          Map.entry("continue_final_message", false));
    }

    @Test
    void templateKwargsMergeLikeVllm() throws Exception {
      ChatPrompt c = parse(Kind.CHAT, chat(",\"chat_template_kwargs\":{\"enable_thinking\":false,"
          + "\"add_generation_prompt\":false,\"custom\":[1]},\"add_generation_prompt\":\"yes\","
          + "\"documents\":[{\"title\":\"t\",\"text\":\"x\"}],\"reasoning_effort\":\"high\"")).chat();
      // The request's own fields override chat_template_kwargs, which come first.
      assertThat(c.templateKwargs()).containsExactly(Map.entry("enable_thinking", false),
          Map.entry("add_generation_prompt", true), Map.entry("custom", List.of(1L)),
          Map.entry("continue_final_message", false),
          Map.entry("documents", List.of(Map.of("title", "t", "text", "x"))), Map.entry("reasoning_effort", "high"));
    }

    @Test
    void continueFinalMessageAloneIsAcceptedButBothTrueIsRejected() throws Exception {
      ChatPrompt c = parse(Kind.CHAT, chat(",\"continue_final_message\":true")).chat();
      assertThat(c.continueFinalMessage()).isTrue();
      assertThat(c.addGenerationPrompt()).isTrue(); // as vLLM: the renderer reports the conflict, not the parser
      assertThat(error(Kind.CHAT, chat(",\"continue_final_message\":true,\"add_generation_prompt\":true")).param())
          .isEqualTo("continue_final_message");
      // vLLM's check tests raw values with Python truthiness: "false" is a non-empty string
      assertThat(error(Kind.CHAT, chat(",\"continue_final_message\":\"false\",\"add_generation_prompt\":1")).param())
          .isEqualTo("continue_final_message");
      ChatPrompt off = parse(Kind.CHAT, chat(",\"continue_final_message\":1,\"add_generation_prompt\":0")).chat();
      assertThat(off.continueFinalMessage()).isTrue();
      assertThat(off.addGenerationPrompt()).isFalse();
    }

    @Test
    void booleansOutsidePydanticsLaxSetAre400s() {
      for (String f : List.of("add_generation_prompt", "continue_final_message", "add_special_tokens")) {
        for (String v : List.of("null", "\"maybe\"", "2", "[]")) {
          assertThat(error(Kind.CHAT, chat(",\"" + f + "\":" + v)).param()).as(f + "=" + v).isEqualTo(f);
        }
      }
    }

    @Test
    void malformedMessagesAre400sNamingTheParameter() {
      assertThat(error(Kind.CHAT, "{\"model\":\"m\"}").param()).isEqualTo("messages");
      assertThat(error(Kind.CHAT, "{\"model\":\"m\",\"messages\":\"hi\"}").param()).isEqualTo("messages");
      assertThat(error(Kind.CHAT, "{\"model\":\"m\",\"messages\":null}").param()).isEqualTo("messages");
      assertThat(error(Kind.CHAT, "{\"model\":\"m\",\"messages\":[1]}").param()).isEqualTo("messages[0]");
      assertThat(error(Kind.CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
          + "{\"content\":\"secret prompt\"}]}").param()).isEqualTo("messages[1].role");
      assertThat(error(Kind.CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":7,\"content\":\"a\"}]}").param())
          .isEqualTo("messages[0].role");
      assertThat(error(Kind.CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":5}]}").param())
          .isEqualTo("messages[0].content");
      assertThat(error(Kind.CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[\"a\",3]}]}")
          .param()).isEqualTo("messages[0].content[1]");
      assertThat(error(Kind.CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"a\"}]}]}")
          .param()).isEqualTo("messages[0].content[0].type");
      assertThat(error(Kind.CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":5}]}]}")
          .param()).isEqualTo("messages[0].content[0].type");
    }

    @Test
    void anEmptyConversationIsTheEnginesToJudge() throws Exception {
      assertThat(parse(Kind.CHAT, "{\"model\":\"m\",\"messages\":[]}").chat().messages()).isEmpty();
    }

    @Test
    void unknownPartTypesRouteByLoadInsteadOfFailing() throws Exception {
      InferenceRequest r = parse(Kind.CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
          + "[{\"type\":\"hologram\",\"hologram\":\"...\"}]}]}");
      assertThat(r.unreproducible()).isEqualTo("unsupported_content_part");
    }

    @Test
    void aRepeatedKeyKeepsItsFirstPositionAndLastValueAsPythonDoes() throws Exception {
      InferenceRequest r = parse(Kind.CHAT, "{\"model\":\"first\",\"messages\":[{\"role\":\"user\","
          + "\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"http://a/1.png\"}}],\"x\":1,"
          + "\"content\":\"replaced\"}],\"model\":\"second\"}");
      assertThat(r.model()).isEqualTo("second");
      assertThat(r.chat().messages().get(0)).containsExactly(Map.entry("role", "user"),
          Map.entry("content", "replaced"), Map.entry("x", 1L));
      assertThat(r.multimodal()).as("the replaced content's image is gone").isEmpty();
    }
  }

  @Nested
  class Tools {

    @Test
    void toolsAreDumpedAsVllmPassesThemToTheTemplate() throws Exception {
      ChatPrompt c = parse(Kind.CHAT, chat(",\"tools\":[{\"function\":{\"parameters\":{\"type\":\"object\"},"
          + "\"name\":\"f\",\"strict\":true},\"extra\":1}]")).chat();
      Map<String, Object> t = c.tools().get(0);
      assertThat(t.keySet()).containsExactly("type", "function", "extra");
      assertThat(((Map<String, Object>) t.get("function")).keySet()).containsExactly("name", "description", "parameters",
          "strict");
      assertThat(((Map<?, ?>) t.get("function")).get("description")).isNull();
      assertThat(c.toolChoice()).isEqualTo("auto"); // vLLM's default when tools are given
    }

    @Test
    void toolChoiceFollowsVllmsRules() throws Exception {
      String tools = ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]";
      assertThat(parse(Kind.CHAT, chat(tools + ",\"tool_choice\":\"none\"")).chat().toolChoice()).isEqualTo("none");
      assertThat(parse(Kind.CHAT, chat(tools + ",\"tool_choice\":null")).chat().toolChoice()).isNull();
      ChatPrompt named = parse(Kind.CHAT,
          chat(tools + ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}")).chat();
      assertThat(named.toolChoice()).isInstanceOf(Map.class);
      ChatPrompt required = parse(Kind.CHAT, chat(",\"tools\":[],\"tool_choice\":\"required\"")).chat();
      assertThat(required.tools()).isNull();
      assertThat(required.toolChoice()).isEqualTo("none");
      assertThat(parse(Kind.CHAT, chat(",\"tools\":[]")).chat().toolChoice()).isNull();

      assertThat(error(Kind.CHAT, chat(",\"tool_choice\":\"auto\"")).param()).isEqualTo("tool_choice");
      assertThat(error(Kind.CHAT, chat(tools + ",\"tool_choice\":\"sometimes\"")).param()).isEqualTo("tool_choice");
      assertThat(error(Kind.CHAT, chat(tools + ",\"tool_choice\":{\"function\":{\"name\":\"g\"}}")).param())
          .isEqualTo("tool_choice");
      assertThat(error(Kind.CHAT, chat(tools + ",\"tool_choice\":{\"function\":\"f\"}")).param())
          .isEqualTo("tool_choice");
    }

    @Test
    void malformedToolsAre400sNamingTheTool() {
      assertThat(error(Kind.CHAT, chat(",\"tools\":{}")).param()).isEqualTo("tools");
      assertThat(error(Kind.CHAT, chat(",\"tools\":[1]")).param()).isEqualTo("tools[0]");
      assertThat(error(Kind.CHAT, chat(",\"tools\":[{\"type\":\"retrieval\",\"function\":{\"name\":\"f\"}}]"))
          .param()).isEqualTo("tools[0].type");
      assertThat(error(Kind.CHAT, chat(",\"tools\":[{\"function\":{\"name\":\"f\"}},{\"type\":\"function\"}]"))
          .param()).isEqualTo("tools[1].function");
      assertThat(error(Kind.CHAT, chat(",\"tools\":[{\"function\":{\"name\":3}}]")).param())
          .isEqualTo("tools[0].function.name");
      assertThat(error(Kind.CHAT, chat(",\"tools\":[{\"function\":{\"name\":\"f\",\"parameters\":[]}}]")).param())
          .isEqualTo("tools[0].function.parameters");
      assertThat(error(Kind.CHAT, chat(",\"documents\":[{\"title\":1}]")).param()).isEqualTo("documents");
      assertThat(error(Kind.CHAT, chat(",\"chat_template_kwargs\":[]")).param()).isEqualTo("chat_template_kwargs");
      assertThat(error(Kind.CHAT, chat(",\"reasoning_effort\":1")).param()).isEqualTo("reasoning_effort");
    }
  }

  @Nested
  class Multimodal {

    static String user(String parts) {
      return "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[" + parts + "]}]}";
    }

    @Test
    void mediaPartsBecomeItemsInOrderWithUuidsOrContentHashes() throws Exception {
      InferenceRequest r = parse(Kind.CHAT, "{\"model\":\"m\",\"messages\":["
          + "{\"role\":\"system\",\"content\":\"s\"},"
          + "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"look\"},"
          + "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x/cat.png\",\"detail\":\"auto\"}},"
          + "{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"UklGRg==\",\"format\":\"wav\"},\"uuid\":\"aud-1\"},"
          + "{\"type\":\"video_url\",\"video_url\":{\"url\":\"https://x/v.mp4\"},\"uuid\":\"vid-1\"}]},"
          + "{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x/cat.png\"}}]}"
          + "]}");
      List<MultimodalItem> items = r.multimodal();
      assertThat(items).extracting(MultimodalItem::index).containsExactly(0, 1, 2, 3);
      assertThat(items).extracting(MultimodalItem::modality)
          .containsExactly(Modality.IMAGE, Modality.AUDIO, Modality.VIDEO, Modality.IMAGE);
      assertThat(items).extracting(MultimodalItem::clientUuid).containsExactly(false, true, true, false);
      assertThat(items.get(1).identifier()).isEqualTo("aud-1");
      assertThat(items.get(2).identifier()).isEqualTo("vid-1");
      assertThat(items.get(0).identifier()).matches("kvr1-mm:image:[0-9a-f]{16}");
      assertThat(items.get(3).identifier()).as("the same image again").isEqualTo(items.get(0).identifier());
      assertThat(items.get(0).message()).isEqualTo(1);
      assertThat(items.get(0).part()).isEqualTo(1);
      assertThat(items.get(3).message()).isEqualTo(2);
      // the payload is replaced by the identifier; everything else of the part is kept
      Map<?, ?> part = (Map<?, ?>) ((List<?>) r.chat().messages().get(1).get("content")).get(1);
      assertThat(part.get("image_url")).isEqualTo(Map.of("url", items.get(0).identifier(), "detail", "auto"));
      assertThat(r.unreproducible()).isNull();
    }

    @Test
    void differentContentGetsDifferentIdentifiersAndModalitiesAreSeparated() throws Exception {
      InferenceRequest r = parse(Kind.CHAT, user(
          "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,AAAA\"}},"
              + "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,AAAB\"}},"
              + "{\"type\":\"audio_url\",\"audio_url\":{\"url\":\"data:image/png;base64,AAAA\"}}"));
      List<String> ids = r.multimodal().stream().map(MultimodalItem::identifier).toList();
      assertThat(ids).doesNotHaveDuplicates();
      assertThat(ids.get(2)).startsWith("kvr1-mm:audio:");
      assertThat(ids.get(2).substring(14)).isEqualTo(ids.get(0).substring(14)); // same bytes, other modality
    }

    @Test
    void partsWithoutTypeOrWithUuidAreClassifiedByTheirMediaKeyAsVllmDoes() throws Exception {
      InferenceRequest r = parse(Kind.CHAT, user("{\"image_url\":\"https://x/a.png\"},"
          + "{\"type\":\"text\",\"video_url\":{\"url\":\"https://x/v.mp4\"},\"uuid\":\"v\"},"
          + "{\"audio_url\":{\"url\":\"https://x/a.mp3\"}},"
          + "{\"type\":\"input_image\",\"image_url\":\"https://x/b.png\"},"
          + "{\"type\":\"image_embeds\",\"image_embeds\":{\"b\":\"QQ==\",\"a\":\"Qg==\"}},"
          + "{\"type\":\"text\",\"text\":\"t\",\"uuid\":\"ignored\"}"));
      assertThat(r.multimodal()).extracting(MultimodalItem::modality)
          .containsExactly(Modality.IMAGE, Modality.VIDEO, Modality.AUDIO, Modality.IMAGE, Modality.IMAGE);
      assertThat(r.multimodal().get(1).identifier()).isEqualTo("v");
      assertThat(r.multimodal()).extracting(MultimodalItem::part).containsExactly(0, 1, 2, 3, 4);
    }

    /**
     * vLLM's video_embeds part (MM_PARSER_MAP, and by key when untyped or with a uuid) is a video item like any
     * other: a uuid is its identifier, else the payload's content hash. It used to be an unknown type (routed by
     * load, its payload kept in memory), or a 400 when it carried a uuid, which vLLM serves.
     */
    @Test
    void videoEmbedsPartsAreVideoItemsAsInVllm() throws Exception {
      InferenceRequest r = parse(Kind.CHAT, user("{\"type\":\"video_embeds\",\"video_embeds\":\"QUFB\"},"
          + "{\"type\":\"video_embeds\",\"video_embeds\":\"QUFB\",\"uuid\":\"ve-1\"},"
          + "{\"video_embeds\":{\"b\":\"QQ==\",\"a\":\"Qg==\"},\"uuid\":\"ve-2\"},"
          + "{\"type\":\"video_embeds\",\"video_embeds\":{\"b\":\"QQ==\",\"a\":\"Qg==\"}},"
          + "{\"type\":\"image_embeds\",\"image_embeds\":{\"b\":\"QQ==\",\"a\":\"Qg==\"}}"));
      assertThat(r.unreproducible()).isNull();
      List<MultimodalItem> items = r.multimodal();
      assertThat(items).extracting(MultimodalItem::modality).containsExactly(Modality.VIDEO, Modality.VIDEO,
          Modality.VIDEO, Modality.VIDEO, Modality.IMAGE);
      assertThat(items.get(0).identifier()).isEqualTo(MediaParts.derived("video", MediaParts.contentHash("QUFB")));
      assertThat(items.get(1).identifier()).isEqualTo("ve-1");
      assertThat(items.get(2).identifier()).isEqualTo("ve-2");
      assertThat(items.get(3).identifier()).startsWith("kvr1-mm:video:")
          .isNotEqualTo(items.get(0).identifier()).endsWith(items.get(4).identifier().substring(14));
      Map<?, ?> part = (Map<?, ?>) ((List<?>) r.chat().messages().get(0).get("content")).get(0);
      assertThat(part.get("video_embeds")).isEqualTo(items.get(0).identifier());
    }

    @Test
    void numericUuidsReadAsPythonsStrAndUseAudioInVideoAddsTheAudioTrack() throws Exception {
      InferenceRequest r = parse(Kind.CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":["
          + "{\"type\":\"video_url\",\"video_url\":{\"url\":\"https://x/v.mp4\"},\"uuid\":123},"
          + "{\"type\":\"video_url\",\"video_url\":{\"url\":\"https://x/w.mp4\"}}]}],"
          + "\"mm_processor_kwargs\":{\"use_audio_in_video\":true}}");
      assertThat(r.multimodal()).extracting(MultimodalItem::modality)
          .containsExactly(Modality.VIDEO, Modality.AUDIO, Modality.VIDEO, Modality.AUDIO);
      assertThat(r.multimodal().get(0).identifier()).isEqualTo("123");
      assertThat(r.multimodal().get(1).identifier()).isEqualTo("123");
      assertThat(r.multimodal().get(3).identifier())
          .isEqualTo(r.multimodal().get(2).identifier().replace(":video:", ":audio:"));
      assertThat(r.multimodal()).extracting(MultimodalItem::index).containsExactly(0, 1, 2, 3);
    }

    /** Python's json keeps the last of a repeated key: replaced parts give neither media items nor a reason. */
    @Test
    void aRepeatedContentKeyForgetsTheReplacedPartsReason() throws Exception {
      InferenceRequest r = parse(Kind.CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
          + "[{\"type\":\"x_part\"}],\"content\":\"hi\"}]}");
      assertThat(r.chat().messages().get(0).get("content")).isEqualTo("hi");
      assertThat(r.unreproducible()).isNull();
    }

    @Test
    void promptEmbedsPartsAreNotReproducible() throws Exception {
      InferenceRequest r = parse(Kind.CHAT, user("{\"type\":\"prompt_embeds\",\"data\":\"AAAA\"}"));
      assertThat(r.unreproducible()).isEqualTo("prompt_embeds");
      assertThat(r.multimodal()).isEmpty();
    }

    @Test
    void aLargeBase64ImageIsHashedNotKept() throws Exception {
      String data = "data:image/jpeg;base64," + "/9j/4AAQSkZJRg".repeat(200_000); // 2.8 MB
      InferenceRequest r = parse(Kind.CHAT, user("{\"type\":\"image_url\",\"image_url\":{\"url\":\"" + data + "\"}}"));
      String id = r.multimodal().get(0).identifier();
      assertThat(id).isEqualTo(MediaParts.derived("image", MediaParts.contentHash(data)));
      assertThat(r.chat().messages().toString()).doesNotContain("/9j/4AAQ").contains(id);
    }
  }

  @Nested
  class Envelope {

    @Test
    void modelIsRequiredAndMustBeANonEmptyString() {
      assertThat(error(Kind.CHAT, "{\"messages\":[]}").param()).isEqualTo("model");
      assertThat(error(Kind.CHAT, "{\"model\":\"\",\"messages\":[]}").param()).isEqualTo("model");
      assertThat(error(Kind.CHAT, "{\"model\":null,\"messages\":[]}").param()).isEqualTo("model");
      assertThat(error(Kind.CHAT, "{\"model\":[\"m\"],\"messages\":[]}").message()).contains("must be a string");
    }

    @Test
    void cacheSaltMustBeANonEmptyStringAsInVllm() throws Exception {
      assertThat(parse(Kind.CHAT, chat(",\"cache_salt\":\"s1\"")).cacheSalt()).isEqualTo("s1");
      assertThat(parse(Kind.CHAT, chat(",\"cache_salt\":null")).cacheSalt()).isNull();
      for (String bad : List.of("\"\"", "1", "true", "[\"s\"]", "{\"s\":1}")) {
        assertThat(error(Kind.CHAT, chat(",\"cache_salt\":" + bad)).param()).as(bad).isEqualTo("cache_salt");
      }
    }

    @Test
    void streamOptionsNeedStreamAsInVllm() throws Exception {
      InferenceRequest r = parse(Kind.CHAT, chat(",\"stream\":\"true\",\"stream_options\":{\"include_usage\":true}"));
      assertThat(r.stream()).isTrue();
      assertThat(r.includeUsage()).isTrue();
      assertThat(error(Kind.CHAT, chat(",\"stream_options\":{\"include_usage\":true}")).param())
          .isEqualTo("stream_options");
      assertThat(parse(Kind.CHAT, chat(",\"stream_options\":{}")).includeUsage()).isNull(); // falsy: no check
    }

    @Test
    void outputHintsFollowVllmsFieldsAndNeverReject() throws Exception {
      OutputSpec o = parse(Kind.CHAT, chat(",\"max_tokens\":100,\"max_completion_tokens\":\"50\",\"n\":3,"
          + "\"min_tokens\":7,\"ignore_eos\":\"true\"")).output();
      assertThat(o).isEqualTo(new OutputSpec(50, 7, true, 3, 0));
      assertThat(o.sequences()).isEqualTo(3);
      assertThat(o.expectedTokens(999)).isEqualTo(50);
      assertThat(parse(Kind.CHAT, chat("")).output()).isEqualTo(new OutputSpec(-1, 0, false, 1, 0));
      assertThat(parse(Kind.CHAT, chat("")).output().expectedTokens(300)).isEqualTo(300);
      assertThat(parse(Kind.COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"p\",\"max_tokens\":null,\"best_of\":4}")
          .output()).isEqualTo(new OutputSpec(-1, 0, false, 1, 4));
      assertThat(parse(Kind.CHAT, chat(",\"max_tokens\":{\"x\":1},\"n\":\"lots\",\"min_tokens\":-5")).output())
          .isEqualTo(new OutputSpec(-1, 0, false, 1, 0));
    }

    @Test
    void truncatePromptTokensIsKeptForThePipeline() throws Exception {
      assertThat(parse(Kind.CHAT, chat(",\"truncate_prompt_tokens\":128")).chat().truncatePromptTokens())
          .isEqualTo(128);
      assertThat(parse(Kind.COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"p\",\"truncate_prompt_tokens\":-1}")
          .completion().truncatePromptTokens()).isEqualTo(-1);
      assertThat(error(Kind.CHAT, chat(",\"truncate_prompt_tokens\":-2")).param()).isEqualTo("truncate_prompt_tokens");
    }

    @Test
    void truncationSideIsVllmsLiteral() throws Exception {
      assertThat(parse(Kind.CHAT, chat(",\"truncation_side\":\"right\"")).chat().truncationSide()).isEqualTo("right");
      assertThat(parse(Kind.COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"p\",\"truncation_side\":\"left\"}")
          .completion().truncationSide()).isEqualTo("left");
      assertThat(parse(Kind.CHAT, chat(",\"truncation_side\":null")).chat().truncationSide()).isNull();
      assertThat(parse(Kind.CHAT, chat("")).chat().truncationSide()).isNull();
      // pydantic's Literal["left", "right"]: exact strings only
      for (String bad : List.of("\"Left\"", "\"\"", "1", "true", "[\"left\"]")) {
        assertThat(error(Kind.CHAT, chat(",\"truncation_side\":" + bad)).param()).as(bad).isEqualTo("truncation_side");
      }
    }

    @Test
    void bodiesThatAreNotOneObjectAre400s() {
      for (String bad : List.of("", "[]", "\"x\"", "{} {}", "{\"model\":\"m\"", "{\"a\":}", "nul", "{\"model\":\"m\"}x",
          "{'model':'m'}")) {
        OpenAiError e = error(Kind.COMPLETIONS, bad);
        assertThat(e.param()).as(bad).isNull();
        assertThat(e.type()).isEqualTo("invalid_request_error");
      }
    }

    @Test
    void syntaxErrorsReportWhereNeverWhat() {
      String secret = "my secret prompt text";
      OpenAiError e = error(Kind.COMPLETIONS, "{\"model\":\"m\",\n\"prompt\":\"" + secret + "\"\"oops\"}");
      assertThat(e.message()).contains("line 2").doesNotContain("secret").doesNotContain("oops");
      assertThat(e.toJson()).doesNotContain("secret");
    }

    @Test
    void nestingIsBoundedAt128Levels() throws Exception {
      String deepOk = "[".repeat(RequestBodyParser.MAX_DEPTH - 4) + "]".repeat(RequestBodyParser.MAX_DEPTH - 4);
      assertThat(parse(Kind.CHAT, chat(",\"chat_template_kwargs\":{\"x\":" + deepOk + "}")).chat()).isNotNull();
      String tooDeep = "[".repeat(RequestBodyParser.MAX_DEPTH + 1) + "]".repeat(RequestBodyParser.MAX_DEPTH + 1);
      assertThat(error(Kind.CHAT, chat(",\"unknown_field\":" + tooDeep)).message()).contains("nests deeper");
      String deepMessage = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"meta\":"
          + "{\"a\":".repeat(200) + "1" + "}".repeat(200) + "}]}";
      assertThat(error(Kind.CHAT, deepMessage).message()).contains("nests deeper");
    }

    @Test
    void unicodeSurvivesExactlyIncludingAstralAndEscapedCharacters() throws Exception {
      String text = "héllo 中文 😀 \u0000 tab\t \"quoted\" \\ — ☃";
      String json = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
          + com.fasterxml.jackson.databind.json.JsonMapper.builder().build().writeValueAsString(text) + "}]}";
      assertThat(parse(Kind.CHAT, json).chat().messages().get(0).get("content")).isEqualTo(text);
      assertThat(parse(Kind.CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
          + "\"\\ud83d\\ude00\\u00e9\"}]}").chat().messages().get(0).get("content")).isEqualTo("😀é");
    }

    @Test
    void invalidUtf8Is400() {
      byte[] b = "{\"model\":\"m\",\"prompt\":\"\u00ff\"}".getBytes(StandardCharsets.ISO_8859_1);
      assertThatThrownBy(() -> parser.parse(Kind.COMPLETIONS, b, b.length)).isInstanceOf(BadRequest.class);
    }

    @Test
    void aOneMegabytePromptParsesInOnePassAndOnlyTheGivenLengthIsRead() throws Exception {
      String big = "word ".repeat(200_000);
      byte[] body = ("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"" + big + "\"}],\"cache_salt\":"
          + "\"s\"}").getBytes(StandardCharsets.UTF_8);
      byte[] padded = java.util.Arrays.copyOf(body, body.length + 100); // trailing garbage outside the length
      java.util.Arrays.fill(padded, body.length, padded.length, (byte) '!');
      InferenceRequest r = parser.parse(Kind.CHAT, padded, body.length);
      assertThat((String) r.chat().messages().get(0).get("content")).hasSize(big.length());
      assertThat(r.bodyBytes()).isEqualTo(body.length);
      assertThat(r.saltSites().values()).hasSize(1);
      assertThat(r.saltSites().values().get(0).end()).isEqualTo(body.length - 1);
    }

    @Test
    void toStringsNeverPrintPromptContent() throws Exception {
      InferenceRequest r = parse(Kind.COMPLETIONS, "{\"model\":\"m\",\"prompt\":[\"secret one\",\"secret two\"]}");
      assertThat(r.toString()).doesNotContain("secret");
      InferenceRequest t = parse(Kind.COMPLETIONS, "{\"model\":\"m\",\"prompt\":[31337, 4242]}");
      assertThat(t.toString()).doesNotContain("31337");
      assertThat(parse(Kind.CHAT, chat("")).chat().toString()).doesNotContain("hi");
    }

    /** vLLM asks for a cache_salt kept from third parties: whoever reads a log could read that tenant's cache. */
    @Test
    void toStringsNeverPrintTheClientsCacheSalt() throws Exception {
      InferenceRequest r = parse(Kind.CHAT, chat(",\"cache_salt\":\"s3cr3t-salt\""));
      assertThat(r.cacheSalt()).isEqualTo("s3cr3t-salt");
      assertThat(r.toString()).doesNotContain("s3cr3t").contains("cacheSalt=<redacted>");
    }
  }
}
