package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.workload.ToolCallAnswer;
import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import java.util.Arrays;
import java.util.function.BiFunction;
import java.util.function.Function;

/**
 * Derives what the model generates for a scripted tool-call answer ({@link ToolCallScript}) from the chat template:
 * the request with the answer appended as the assistant message the client will resend (Messages: a text block,
 * then {@code tool_use} blocks; chat: {@code content} and {@code tool_calls}) and a later user message (so the
 * template renders the answer as history, as the next turn will), rendered by the router's own conversion; the
 * generated text is what follows the prompt's rendering, through the first end-of-turn token. The text alone,
 * rendered the same way, tells where the text ends and the calls begin.
 */
final class ToolCallRendering {

  private static final ObjectMapper JSON = new ObjectMapper();

  private final BiFunction<Kind, JsonNode, String> render;
  private final Function<String, int[]> tokenize;
  private final int endOfTurn;

  /**
   * @param render a body of that kind, converted and rendered as the router's request path renders it
   * @param tokenize the tokenizer on rendered text, without special tokens (the template writes them)
   * @param endOfTurn the token the template ends an assistant message with
   */
  ToolCallRendering(BiFunction<Kind, JsonNode, String> render, Function<String, int[]> tokenize, int endOfTurn) {
    this.render = render;
    this.tokenize = tokenize;
    this.endOfTurn = endOfTurn;
  }

  /** The script of {@code answer} to {@code request}, a Messages or chat body. */
  ToolCallScript script(Kind kind, JsonNode request, ToolCallAnswer answer) {
    String promptText = render.apply(kind, request);
    int[] tokens = generated(kind, request, promptText, answer, true);
    int textTokens = 0;
    if (!answer.text().isEmpty()) {
      int[] text = generated(kind, request, promptText, answer, false);
      // the tokens both renderings share, short of the text-only one's end of turn
      while (textTokens < Math.min(tokens.length, text.length - 1) && tokens[textTokens] == text[textTokens]) {
        textTokens++;
      }
    }
    String[] deltas = new String[tokens.length];
    Arrays.fill(deltas, "");
    String text = answer.text();
    int from = 0;
    while (from < text.length() && textTokens > 0) {
      int space = text.indexOf(' ', from + 1);
      int end = space < 0 ? text.length() : space;
      // a word arrives with the token that completes the encoding of the text up to it
      int t = Math.min(textTokens, tokenize.apply(text.substring(0, end)).length);
      deltas[Math.max(0, t - 1)] += text.substring(from, end);
      from = end;
    }
    return new ToolCallScript(answer, tokens, textTokens, deltas);
  }

  /** The generated tokens, with the answer's calls or without them. */
  private int[] generated(Kind kind, JsonNode request, String promptText, ToolCallAnswer answer, boolean calls) {
    ObjectNode body = ((ObjectNode) request).deepCopy();
    body.remove("vllm_xargs");
    ArrayNode messages = body.withArray("messages");
    messages.add(kind == Kind.MESSAGES ? anthropic(answer, calls) : chat(answer, calls));
    messages.addObject().put("role", "user").put("content", "Go on.");
    String full = render.apply(kind, body);
    if (!full.startsWith(promptText)) {
      throw new PromptEncoder.Unsupported("the chat template renders the answer's history differently from the "
          + "prompt");
    }
    int[] after = tokenize.apply(full.substring(promptText.length()));
    for (int i = 0; i < after.length; i++) {
      if (after[i] == endOfTurn) {
        return Arrays.copyOf(after, i + 1);
      }
    }
    throw new PromptEncoder.Unsupported("the chat template ends the answer with no end-of-turn token");
  }

  /** The answer as a Messages client resends it: its text block, then a {@code tool_use} block per call. */
  private static ObjectNode anthropic(ToolCallAnswer answer, boolean calls) {
    ObjectNode assistant = JSON.createObjectNode().put("role", "assistant");
    ArrayNode content = assistant.putArray("content");
    if (!answer.text().isEmpty()) {
      content.addObject().put("type", "text").put("text", answer.text());
    }
    for (ToolCallAnswer.Call c : calls ? answer.calls() : java.util.List.<ToolCallAnswer.Call>of()) {
      content.addObject().put("type", "tool_use").put("id", c.id()).put("name", c.name())
          .set("input", JSON.valueToTree(c.input()));
    }
    return assistant;
  }

  /** The answer as a chat client resends the message it received ({@link ToolCallAnswer#chatToolCalls}). */
  private static ObjectNode chat(ToolCallAnswer answer, boolean calls) {
    ObjectNode assistant = JSON.createObjectNode().put("role", "assistant");
    if (answer.text().isEmpty()) {
      assistant.putNull("content");
    } else {
      assistant.put("content", answer.text());
    }
    if (calls) {
      assistant.set("tool_calls", answer.chatToolCalls());
    }
    return assistant;
  }
}
