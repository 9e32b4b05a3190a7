package dev.kvrouter.examples.sim.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.workload.ToolCallAnswer;
import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

/**
 * A scripted tool-call answer is derived from the prompt's rendering the worker already made (Qwen3's template and
 * tokenizer): the answer's own renderings are all it adds, and the script is token for token the one derived by
 * rendering the prompt again.
 */
class ToolCallRenderingTest {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final TestEncoders ENCODERS = new TestEncoders();

  @AfterAll
  static void close() {
    ENCODERS.close();
  }

  private static PipelinePromptEncoder qwen() {
    return ENCODERS.get("qwen3");
  }

  private static ObjectNode messages(boolean reasoning, boolean thinkingOff) {
    ObjectNode b = ToolCallAnswerFixture.readTurn("test/qwen3", 32000, "Where are numbers lexed?");
    ObjectNode x = b.putObject("vllm_xargs").put("answer_text", "I will read the lexer first.");
    if (reasoning) {
      x.put("answer_reasoning", "Numbers come from the lexer so that file goes first.");
    }
    if (thinkingOff) {
      b.putObject("thinking").put("type", "disabled");
    }
    x.putArray("answer_tool_calls").add("{\"id\": \"toolu_1\", \"name\": \"Read\", \"input\": "
        + "{\"file_path\": \"src/Lexer.java\"}}");
    return b;
  }

  private static ObjectNode chat(boolean thinkingOff) {
    ObjectNode b = JSON.createObjectNode().put("model", "test/qwen3").put("max_tokens", 1000);
    ObjectNode fn = b.putArray("tools").addObject().put("type", "function").putObject("function")
        .put("name", "Read").put("description", "Reads a file.");
    fn.putObject("parameters").put("type", "object").putObject("properties").putObject("file_path")
        .put("type", "string");
    b.putArray("messages").addObject().put("role", "user").put("content", "How are floats lexed?");
    ObjectNode x = b.putObject("vllm_xargs").put("answer_reasoning", "Floats are the lexer's.")
        .put("answer_text", "Reading it.");
    x.putArray("answer_tool_calls").add("{\"id\": \"call_1\", \"name\": \"Read\", \"input\": "
        + "{\"file_path\": \"src/Lexer.java\"}}");
    if (thinkingOff) {
      b.putObject("chat_template_kwargs").put("enable_thinking", false);
    }
    return b;
  }

  @Test
  void theScriptStartsFromThePromptsRenderingAndRendersOnlyTheAnswer() {
    check(Kind.MESSAGES, messages(false, false));
    check(Kind.MESSAGES, messages(true, false));
    check(Kind.MESSAGES, messages(true, true));
    check(Kind.CHAT, chat(false));
    check(Kind.CHAT, chat(true));
  }

  private static void check(Kind kind, ObjectNode body) {
    ToolCallAnswer answer = ToolCallAnswerFixture.of(body);
    PromptEncoder.ChatTokens prompt = kind == Kind.MESSAGES ? qwen().encodeMessagesPrompt(body)
        : qwen().encodeChatPrompt(body);
    assertThat(prompt.text()).isNotNull();
    List<JsonNode> rendered = new ArrayList<>();
    ToolCallRendering counted = new ToolCallRendering((k, b) -> {
      rendered.add(b);
      return qwen().renderText(k, b);
    }, text -> qwen().resources().tokenizer().encode(text, false), qwen().endOfTurnToken());
    ToolCallScript once = counted.script(kind, body, prompt.text(), answer);
    int messages = body.path("messages").size();
    assertThat(rendered).as("every rendering holds the answer: the prompt's own is not redone").isNotEmpty()
        .allSatisfy(b -> assertThat(b.path("messages").size()).isGreaterThan(messages));

    ToolCallScript twice = qwen().toolCallScript(kind, body, answer);
    assertThat(once.tokens()).isEqualTo(twice.tokens());
    assertThat(once.reasoningTokens()).isEqualTo(twice.reasoningTokens());
    assertThat(once.textTokens()).isEqualTo(twice.textTokens());
    assertThat(once.deltas()).isEqualTo(twice.deltas());
    assertThat(once.separator()).isEqualTo(twice.separator());
    assertThat(qwen().toolCallScript(kind, body, answer, prompt.text()).tokens()).isEqualTo(twice.tokens());
  }
}
