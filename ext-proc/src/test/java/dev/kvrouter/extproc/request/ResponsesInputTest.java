package dev.kvrouter.extproc.request;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The Responses-to-chat conversion, one vLLM rule per test (vllm/entrypoints/openai/responses/utils.py and
 * protocol.py); scripts/fixtures/responses_templates.py checks the resulting prompts against the real template.
 */
class ResponsesInputTest {

  private static InferenceRequest parse(String fields) throws Exception {
    byte[] b = ("{\"model\":\"m\"," + fields + "}").getBytes(StandardCharsets.UTF_8);
    return new RequestBodyParser().parse(Kind.RESPONSES, b, b.length);
  }

  private static List<Map<String, Object>> messages(String fields) throws Exception {
    InferenceRequest r = parse(fields);
    assertThat(r.unreproducible()).isNull();
    return r.chat().messages();
  }

  private static OpenAiError error(String fields) {
    return Refusals.of(() -> parse(fields), fields);
  }

  /** A reasoning effort of the wrong type names the field it is in, not its object. */
  @Test
  void aBadReasoningEffortNamesItsField() {
    OpenAiError e = error("\"input\":\"hi\",\"reasoning\":{\"effort\":3}");
    assertThat(e.param()).isEqualTo("reasoning.effort");
    assertThat(e.message()).isEqualTo("`reasoning.effort` must be a string");
  }

  /** A single input item that vLLM's pydantic models refuse, answered with a 400 naming {@code param}. */
  private static void refusedAt(String item, String param) {
    assertThat(error("\"input\":[" + item + "]").param()).as(item).isEqualTo(param);
  }

  /** construct_input_messages: truthy instructions become a leading system message, a string input one user. */
  @Test
  void instructionsAreASystemMessageAndAStringInputAUserMessage() throws Exception {
    assertThat(messages("\"instructions\":\"be brief\",\"input\":\"hi\"")).containsExactly(
        Map.of("role", "system", "content", "be brief"), Map.of("role", "user", "content", "hi"));
    assertThat(messages("\"instructions\":\"\",\"input\":\"\"")).as("empty instructions add nothing")
        .containsExactly(Map.of("role", "user", "content", ""));
    assertThat(error("\"instructions\":5,\"input\":\"hi\"").param()).isEqualTo("instructions");
  }

  /**
   * _construct_message_from_response_item: user, system and developer message items are passed on as chat messages
   * (content string or parts, which the chat path reads like chat content); roles outside the four are refused.
   */
  @Test
  void inputMessagesOfUserSystemAndDeveloperPassOnWithTheirContent() throws Exception {
    List<Map<String, Object>> m = messages("\"input\":[{\"type\":\"message\",\"role\":\"developer\",\"content\":"
        + "\"rules\",\"id\":\"x\"},{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"a\"}]}]");
    assertThat(m.get(0)).containsExactly(Map.entry("role", "developer"), Map.entry("content", "rules"));
    assertThat(m.get(1).get("content")).isEqualTo(List.of(Map.of("type", "input_text", "text", "a")));
    assertThat(error("\"input\":[{\"role\":\"tool\",\"content\":\"x\"}]").param()).isEqualTo("input[0].role");
    assertThat(error("\"input\":[{\"role\":\"user\"}]").param()).isEqualTo("input[0].content");
    assertThat(error("\"input\":{\"role\":\"user\"}").param()).isEqualTo("input");
  }

  /**
   * _construct_message_from_response_item: an assistant item keeps its first part's text only (ResponseOutputMessage
   * .content[0].text, or the dict form's .get("text", "")).
   */
  @Test
  void anAssistantItemKeepsItsFirstPartsText() throws Exception {
    List<Map<String, Object>> m = messages("\"input\":[{\"type\":\"message\",\"role\":\"assistant\",\"content\":["
        + "{\"type\":\"output_text\",\"text\":\"one\"},{\"type\":\"output_text\",\"text\":\"two\"}]},"
        + "{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":[]}]");
    assertThat(m.get(0)).isEqualTo(Map.of("role", "assistant", "content", "one"));
    assertThat(m.get(2)).isEqualTo(Map.of("role", "assistant", "content", ""));
  }

  /**
   * _construct_message_from_response_item, ResponseFunctionToolCall: a call joins the assistant message before it
   * (appending to its tool_calls), else starts one; a namespaced call is named namespace__name.
   */
  @Test
  void functionCallsMergeIntoThePrecedingAssistantMessage() throws Exception {
    List<Map<String, Object>> m = messages("\"input\":[{\"role\":\"user\",\"content\":\"q\"},"
        + "{\"role\":\"assistant\",\"content\":\"calling\"},"
        + "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{}\"},"
        + "{\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"g\",\"namespace\":\"crm\",\"arguments\":\"{}\"}]");
    assertThat(m).hasSize(2);
    assertThat(m.get(1).get("content")).isEqualTo("calling");
    assertThat(m.get(1).get("tool_calls")).isEqualTo(List.of(
        Map.of("id", "c1", "type", "function", "function", Map.of("name", "f", "arguments", "{}")),
        Map.of("id", "c2", "type", "function", "function", Map.of("name", "crm__g", "arguments", "{}"))));
    List<Map<String, Object>> alone = messages("\"input\":[{\"type\":\"function_call\",\"call_id\":\"c1\","
        + "\"name\":\"f\",\"arguments\":\"{}\"}]");
    assertThat(alone.get(0)).containsOnlyKeys("role", "tool_calls");
    assertThat(error("\"input\":[{\"type\":\"function_call\",\"name\":\"f\",\"arguments\":\"{}\"}]").param())
        .isEqualTo("input[0].call_id");
  }

  /** _construct_message_from_response_item, function_call_output: a tool message with the call's id. */
  @Test
  void aFunctionCallOutputIsAToolMessage() throws Exception {
    assertThat(messages("\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"21C\"}]"))
        .containsExactly(Map.of("role", "tool", "content", "21C", "tool_call_id", "c1"));
  }

  /**
   * _construct_message_from_response_item, ResponseReasoningItem: its first content text (else first summary text)
   * becomes the assistant's reasoning, merged into the assistant message before it when that has none; encrypted
   * reasoning is refused as vLLM refuses it.
   */
  @Test
  void reasoningBecomesTheAssistantsReasoningAndTheNextItemsJoinIt() throws Exception {
    List<Map<String, Object>> m = messages("\"input\":[{\"role\":\"user\",\"content\":\"q\"},"
        + "{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"sum\"}],"
        + "\"content\":[{\"type\":\"reasoning_text\",\"text\":\"think\"}]},"
        + "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"a\"}]},"
        + "{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\",\"arguments\":\"{}\"},"
        + "{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"only summary\"}]}]");
    assertThat(m).hasSize(3);
    assertThat(m.get(1)).containsKeys("tool_calls").containsEntry("reasoning", "think").containsEntry("content", "a");
    assertThat(m.get(2)).isEqualTo(Map.of("role", "assistant", "reasoning", "only summary"));
    assertThat(error("\"input\":[{\"type\":\"reasoning\",\"summary\":[],\"encrypted_content\":\"gAAA\"}]").message())
        .isEqualTo("Encrypted content is not supported.");
  }

  /** should_continue_final_message and build_chat_params: a partial last message is continued, not answered. */
  @Test
  void aPartialLastMessageIsContinued() throws Exception {
    ChatPrompt p = parse("\"input\":[{\"role\":\"user\",\"content\":\"q\"},{\"type\":\"message\",\"role\":"
        + "\"assistant\",\"status\":\"incomplete\",\"content\":[{\"type\":\"output_text\",\"text\":\"An\"}]}]").chat();
    assertThat(p.continueFinalMessage()).isTrue();
    assertThat(p.addGenerationPrompt()).isFalse();
    ChatPrompt done = parse("\"input\":[{\"role\":\"user\",\"content\":\"q\",\"status\":\"completed\"}]").chat();
    assertThat(done.continueFinalMessage()).isFalse();
    assertThat(done.addGenerationPrompt()).isTrue();
  }

  /**
   * should_continue_final_message reads the status of the validated item, and pydantic keeps it only where the item's
   * model declares one: a reasoning item, a typed assistant message with list content (ResponseOutputMessage), an
   * input Message with list content. String content, and an untyped assistant item, validate as EasyInputMessage,
   * which has no status: such an item is answered, not continued.
   */
  @Test
  void aStatusPydanticDropsDoesNotContinueTheMessage() throws Exception {
    for (String last : List.of("{\"role\":\"assistant\",\"content\":\"An\",\"status\":\"incomplete\"}",
        "{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"An\",\"status\":\"in_progress\"}",
        "{\"role\":\"user\",\"content\":\"q\",\"status\":\"in_progress\"}",
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"input_text\",\"text\":\"An\"}],\"status\":\"incomplete\"}")) {
      ChatPrompt p = parse("\"input\":[{\"role\":\"user\",\"content\":\"q\"}," + last + "]").chat();
      assertThat(p.continueFinalMessage()).as(last).isFalse();
      assertThat(p.addGenerationPrompt()).as(last).isTrue();
    }
    assertThat(parse("\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"q\"}],"
        + "\"status\":\"in_progress\"}]").chat().continueFinalMessage()).as("an input Message keeps its status")
        .isTrue();
  }

  /**
   * construct_tool_dicts and convert_tool_responses_to_completions_format: function tools become chat tools
   * (FunctionTool.model_dump re-validated as vLLM main's FunctionDefinition, whose dump keeps name, description,
   * parameters, and strict and defer_loading only when set: the client's extra key goes), namespaced ones flattened,
   * other types dropped;
   * check_tool_usage defaults the choice to "none" without tools and refuses what it cannot meet.
   */
  @Test
  void functionToolsBecomeChatToolsAndOthersAreDropped() throws Exception {
    ChatPrompt p = parse("\"input\":\"hi\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"strict\":true,"
        + "\"x\":1},{\"type\":\"web_search\"},{\"type\":\"namespace\",\"name\":\"crm\",\"description\":\"d\","
        + "\"tools\":[{\"type\":\"function\",\"name\":\"g\"}]}],\"tool_choice\":{\"type\":\"function\","
        + "\"name\":\"crm__g\"}").chat();
    assertThat(p.tools()).hasSize(2);
    assertThat(p.tools().get(0)).containsOnlyKeys("type", "function");
    assertThat(List.copyOf(((Map<?, ?>) p.tools().get(0).get("function")).keySet())).isEqualTo(List.of("name",
        "description", "parameters", "strict"));
    assertThat(((Map<?, ?>) p.tools().get(1).get("function")).get("name")).isEqualTo("crm__g");
    assertThat(parse("\"input\":\"hi\"").chat().toolChoice()).isEqualTo("none");
    assertThat(error("\"input\":\"hi\",\"tool_choice\":\"required\"").message())
        .isEqualTo("Tool choice 'required' must be specified with 'tools' parameter.");
    assertThat(error("\"input\":\"hi\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}],\"tool_choice\":"
        + "{\"type\":\"function\",\"name\":\"nope\"}").param()).isEqualTo("tool_choice");
  }

  /**
   * check_tool_usage collects the names of every tool the request lists (custom tools, and every tool of a namespace,
   * bare and flattened), not only of the function tools: a named choice of a custom tool is served, not refused.
   */
  @Test
  void aNamedChoiceMayNameAnyListedTool() throws Exception {
    String tools = "\"tools\":[{\"type\":\"function\",\"name\":\"f\"},{\"type\":\"custom\",\"name\":\"c\"},"
        + "{\"type\":\"namespace\",\"name\":\"n\",\"description\":\"d\",\"tools\":[{\"type\":\"custom\","
        + "\"name\":\"k\"}]}]";
    for (String name : List.of("c", "k", "n__k")) {
      ChatPrompt p = parse("\"input\":\"hi\"," + tools + ",\"tool_choice\":{\"type\":\"function\",\"name\":\""
          + name + "\"}").chat();
      assertThat(p.tools()).as(name).hasSize(1);
    }
    assertThat(error("\"input\":\"hi\",\"tools\":[{\"type\":\"web_search\"}],\"tool_choice\":{\"type\":\"function\"}")
        .param()).as("a nameless choice matches no nameless tool").isEqualTo("tool_choice");
  }

  /**
   * ResponsesRequest.tools is a list (not optional) of the SDK's tools, and a NamespaceTool needs a string description
   * and tool objects: pydantic refuses these before construct_tool_dicts, which would otherwise drop them silently.
   */
  @Test
  void toolsOfShapesPydanticRefusesAreRefused() {
    assertThat(error("\"input\":\"hi\",\"tools\":null").param()).isEqualTo("tools");
    assertThat(error("\"input\":\"hi\",\"tools\":[{\"type\":\"namespace\",\"name\":\"n\",\"tools\":[]}]").param())
        .isEqualTo("tools[0]");
    assertThat(error("\"input\":\"hi\",\"tools\":[{\"type\":\"namespace\",\"name\":\"n\",\"description\":\"d\","
        + "\"tools\":[5]}]").param()).isEqualTo("tools[0].tools[0]");
  }

  /**
   * FunctionTool.strict and defer_loading are the SDK's Optional[bool]: pydantic's lax bool turns "yes" or 0 into
   * true or false before model_dump, so the template sees the boolean; what it cannot read as one is a 400.
   */
  @Test
  @SuppressWarnings("unchecked")
  void aToolsBooleanFieldsAreDumpedAsPydanticReadsThem() throws Exception {
    ChatPrompt p = parse("\"input\":\"hi\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"strict\":\"yes\","
        + "\"defer_loading\":0},{\"type\":\"namespace\",\"name\":\"n\",\"description\":\"d\",\"tools\":["
        + "{\"type\":\"function\",\"name\":\"g\",\"strict\":\"off\"}]}]").chat();
    assertThat((Map<Object, Object>) p.tools().get(0).get("function")).containsEntry("strict", true)
        .containsEntry("defer_loading", false);
    assertThat((Map<Object, Object>) p.tools().get(1).get("function")).containsEntry("strict", false)
        .doesNotContainKey("defer_loading");
    assertThat(error("\"input\":\"hi\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"strict\":\"maybe\"}]")
        .param()).isEqualTo("tools[0].strict");
  }

  /**
   * ResponsesRequest.tool_choice is the SDK's ToolChoice: "none", "auto", "required" or an object with its literal
   * type; pydantic refuses anything else (a null too: the field is not optional), with tools or without.
   */
  @Test
  void aToolChoiceOutsideTheSdksShapesIsRefused() {
    String tools = "\"tools\":[{\"type\":\"function\",\"name\":\"f\"}],";
    for (String choice : List.of("5", "null", "[1]", "\"bogus\"", "{}", "{\"type\":7}")) {
      assertThat(error("\"input\":\"hi\"," + tools + "\"tool_choice\":" + choice).param()).as(choice)
          .isEqualTo("tool_choice");
      assertThat(error("\"input\":\"hi\",\"tool_choice\":" + choice).param()).as("no tools: " + choice)
          .isEqualTo("tool_choice");
    }
  }

  /**
   * build_chat_params and build_tok_params: reasoning.effort sets reasoning_effort and (unless the client set it)
   * enable_thinking; chat_template_kwargs pass on; truncation "auto" truncates to the context; the rendered text is
   * tokenized with special tokens (TokenizeParams' default).
   */
  @Test
  void reasoningKwargsAndTruncationFollowBuildChatAndTokParams() throws Exception {
    ChatPrompt p = parse("\"input\":\"hi\",\"reasoning\":{\"effort\":\"none\"},\"truncation\":\"auto\"").chat();
    assertThat(p.reasoningEffort()).isEqualTo("none");
    assertThat(p.chatTemplateKwargs()).containsEntry("enable_thinking", false);
    assertThat(p.truncatePromptTokens()).isEqualTo(-1);
    assertThat(p.addSpecialTokens()).isTrue();
    ChatPrompt own = parse("\"input\":\"hi\",\"reasoning\":{\"effort\":\"high\"},"
        + "\"chat_template_kwargs\":{\"enable_thinking\":false}").chat();
    assertThat(own.chatTemplateKwargs()).containsEntry("enable_thinking", false);
    assertThat(parse("\"input\":\"hi\",\"truncation\":\"disabled\"").chat().truncatePromptTokens()).isNull();
    assertThat(error("\"input\":\"hi\",\"truncation\":\"left\"").param()).isEqualTo("truncation");
  }

  /**
   * build_tok_params truncates whenever {@code truncation != "disabled"}: an explicit null (the field is Optional)
   * truncates to the context, while an absent field takes the "disabled" default.
   */
  @Test
  void anExplicitNullTruncationTruncates() throws Exception {
    assertThat(parse("\"input\":\"hi\",\"truncation\":null").chat().truncatePromptTokens()).isEqualTo(-1);
    assertThat(parse("\"input\":\"hi\"").chat().truncatePromptTokens()).isNull();
  }

  /**
   * input_image parts: read like chat's image parts (payload hashed, not kept), so the multimodal path applies;
   * media in an assistant item never reaches the prompt (only the first part's text does) and is not an item.
   */
  @Test
  void imagePartsAreMediaItemsLikeChatsExceptInAssistantItems() throws Exception {
    InferenceRequest r = parse("\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"see\"},"
        + "{\"type\":\"input_image\",\"image_url\":\"https://example.com/a.png\",\"detail\":\"auto\"}]},"
        + "{\"role\":\"assistant\",\"content\":[{\"type\":\"input_text\",\"text\":\"ok\"},{\"type\":\"input_image\","
        + "\"image_url\":\"https://example.com/b.png\",\"detail\":\"auto\"}]}]");
    assertThat(r.multimodal()).hasSize(1);
    assertThat(r.multimodal().get(0).modality()).isEqualTo(MultimodalItem.Modality.IMAGE);
    assertThat(r.chat().messages().get(0).toString()).doesNotContain("example.com");
  }

  /**
   * The input items are the SDK's typed dicts, which pydantic checks before any conversion: a null type, an assistant
   * item whose content is not a string or a list of part objects (or whose first part's text is not a string), a
   * bare string part, a non-string namespace or a malformed reasoning entry is a 400 there, not an empty text here.
   */
  @Test
  void itemsOfTheWrongJsonTypesAreRefusedNotTemplated() throws Exception {
    refusedAt("{\"type\":null,\"role\":\"user\",\"content\":\"x\"}", "input[0].type");
    for (String content : List.of("5", "null", "{}", "true")) {
      refusedAt("{\"role\":\"assistant\",\"content\":" + content + "}", "input[0].content");
    }
    refusedAt("{\"role\":\"assistant\"}", "input[0].content");
    refusedAt("{\"role\":\"assistant\",\"content\":[{\"type\":\"input_text\",\"text\":{\"a\":1}}]}",
        "input[0].content[0].text");
    refusedAt("{\"role\":\"assistant\",\"content\":[\"s\"]}", "input[0].content[0]");
    refusedAt("{\"role\":\"user\",\"content\":[\"s\"]}", "input[0].content[0]");
    refusedAt("{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":[\"s\"]}", "input[0].output[0]");
    refusedAt("{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\",\"arguments\":\"{}\",\"namespace\":5}",
        "input[0].namespace");
    refusedAt("{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"a\"},5]}",
        "input[0].summary[1].text");
    assertThat(messages("\"input\":[{\"type\":\"reasoning\",\"summary\":[5],\"content\":[{\"type\":\"reasoning_text\","
        + "\"text\":\"t\"}]}]")).as("the summary is never read when there is content")
        .containsExactly(Map.of("role", "assistant", "reasoning", "t"));
  }

  /**
   * A message's content parts are the SDK's input parts (ResponseInputMessageContentList: input_text with a string
   * text, input_image with its required detail, input_file), not chat's: pydantic refuses a "text" or "image_url"
   * part, and an untyped assistant item, which validates as EasyInputMessage, refuses output_text parts.
   */
  @Test
  void messageContentPartsAreTheSdksInputParts() throws Exception {
    refusedAt("{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"u\"}]}", "input[0].content[0].type");
    refusedAt("{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":\"u\"}]}",
        "input[0].content[0].type");
    refusedAt("{\"role\":\"system\",\"content\":[{\"type\":\"input_text\",\"text\":5}]}", "input[0].content[0].text");
    refusedAt("{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"u\"}]}",
        "input[0].content[0].detail");
    refusedAt("{\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"An\"}]}",
        "input[0].content[0].type");
    assertThat(parse("\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"u\","
        + "\"detail\":\"auto\"}]}]").multimodal()).hasSize(1);
  }

  /**
   * Python's json keeps the last of a repeated key, and only the parts that reach the template (a message's content,
   * a tool output's output) are media: the media items and reasons of parts that were replaced, or that sit under
   * the key the item's type does not template, are not the prompt's.
   */
  @Test
  void onlyTheTemplatedPartsGiveMediaItemsAndReasons() throws Exception {
    String img = "[{\"type\":\"input_image\",\"image_url\":\"data:image/png;base64,AAAA\",\"detail\":\"auto\"}]";
    assertThat(parse("\"input\":[{\"role\":\"user\",\"content\":" + img + ",\"content\":\"hi\"}]").multimodal())
        .as("content replaced by a string").isEmpty();
    assertThat(parse("\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":" + img
        + ",\"output\":\"x\"}]").multimodal()).as("output replaced by a string").isEmpty();
    InferenceRequest both = parse("\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":"
        + img + ",\"content\":[]}]");
    assertThat(both.chat().messages().get(0).get("content")).asList().hasSize(1);
    assertThat(both.multimodal()).as("the output's image, beside an untemplated content").hasSize(1);
    assertThat(parse("\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_file\",\"file_id\":\"f\"}],"
        + "\"content\":\"hi\"}]")
        .unreproducible()).as("a replaced unknown part").isNull();
  }

  /** What vLLM does not translate, or keeps on the worker, is not guessed: routed by load with its reason. */
  @Test
  void storedConversationsAndUntranslatedItemsAreNotReproduced() throws Exception {
    assertThat(parse("\"input\":\"more\",\"previous_response_id\":\"resp_1\"").unreproducible())
        .isEqualTo(InferenceRequest.RESPONSES_STORED);
    assertThat(parse("\"input\":[{\"type\":\"item_reference\",\"id\":\"msg_1\"}]").unreproducible())
        .isEqualTo(InferenceRequest.RESPONSES_ITEM);
    assertThat(parse("\"input\":[{\"type\":\"web_search_call\",\"id\":\"ws\",\"status\":\"completed\"}]")
        .unreproducible()).isEqualTo(InferenceRequest.RESPONSES_ITEM);
    assertThat(parse("\"input\":[{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"refusal\","
        + "\"refusal\":\"no\"}]}]").unreproducible()).isEqualTo(InferenceRequest.RESPONSES_ITEM);
    assertThat(parse("\"input\":\"x\",\"previous_input_messages\":[{\"role\":\"user\"}]").unreproducible())
        .isEqualTo(InferenceRequest.RESPONSES_PREVIOUS_INPUT);
    assertThat(parse("\"input\":[{\"type\":\"reasoning\",\"summary\":[],\"content\":[{\"type\":\"reasoning_text\","
        + "\"text\":\"t\"}]},{\"role\":\"user\",\"content\":\"q\"}]").unreproducible())
        .as("a reasoning item's parts are not content parts").isNull();
  }
}
