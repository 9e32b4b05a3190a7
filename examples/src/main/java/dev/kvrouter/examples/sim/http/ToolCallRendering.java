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

  /**
   * The script of {@code answer} to {@code request}, a Messages or chat body whose rendering is {@code promptText}
   * (the worker rendered it for the prompt: the answer's renderings are all this adds).
   */
  ToolCallScript script(Kind kind, JsonNode request, String promptText, ToolCallAnswer answer) {
    if (!answer.reasoning().isEmpty()) {
      ToolCallScript thinking = thinking(kind, request, promptText, answer);
      if (thinking != null) {
        return thinking;
      }
    }
    // no thinking: what the model writes is the answer alone, as the history renders it; a template whose
    // generation prompt already holds a closed (empty) think block (Qwen3 with enable_thinking false), which the
    // history leaves out, renders it only as the last turn
    ToolCallAnswer plain = answer.withReasoning("");
    String full = suffix(kind, request, promptText, plain, true, true);
    boolean history = full != null;
    full = history ? full : suffix(kind, request, promptText, plain, true, false);
    int[] tokens = endOfTurn(tokenize.apply(required(full)));
    String text = plain.text().isEmpty() ? null : suffix(kind, request, promptText, plain, false, history);
    int textTokens = text == null ? 0 : shared(tokens, endOfTurn(tokenize.apply(required(text))));
    String[] deltas = emptyDeltas(tokens.length);
    spread(deltas, "", plain.text(), 0, textTokens);
    return new ToolCallScript(plain, tokens, 0, textTokens, deltas, separator(full, text));
  }

  /**
   * The script of an answer with reasoning when the request leaves thinking on as the template sees it: the answer
   * rendered as the last turn, where a reasoning template keeps its think block (Qwen3 drops it from turns before
   * the last user query), i.e. what the model writes; null when thinking is off (the rendering does not extend the
   * prompt, as Qwen3's empty think block in the prompt does not, or has no reasoning in it).
   */
  private ToolCallScript thinking(Kind kind, JsonNode request, String promptText, ToolCallAnswer answer) {
    String full = suffix(kind, request, promptText, answer, true, false);
    if (full == null || !full.contains(answer.reasoning().strip())) {
      return null;
    }
    int[] tokens = endOfTurn(tokenize.apply(full));
    // the think block is what two answers differing only in their text share
    String a = suffix(kind, request, promptText, new ToolCallAnswer(answer.reasoning(), "a", answer.calls()), false,
        false);
    String b = suffix(kind, request, promptText, new ToolCallAnswer(answer.reasoning(), "b", answer.calls()), false,
        false);
    int chars = 0;
    while (a != null && b != null && chars < Math.min(a.length(), b.length()) && a.charAt(chars) == b.charAt(chars)) {
      chars++;
    }
    String think = full.substring(0, chars);
    int reasoningTokens = shared(tokens, tokenize.apply(think));
    String text = answer.text().isEmpty() ? null : suffix(kind, request, promptText, answer, false, false);
    int textTokens = text == null ? reasoningTokens : shared(tokens, endOfTurn(tokenize.apply(required(text))));
    String[] deltas = emptyDeltas(tokens.length);
    int at = think.indexOf(answer.reasoning().strip());
    spread(deltas, think.substring(0, at), answer.reasoning().strip(), 0, reasoningTokens);
    spread(deltas, think, answer.text(), reasoningTokens, textTokens);
    return new ToolCallScript(answer, tokens, reasoningTokens, textTokens, deltas, separator(full, text));
  }

  /**
   * The whitespace the template writes between the answer's text and its calls (Qwen3's {@code \n}), which vLLM's
   * hermes tool parser keeps in {@code content} (the text before {@code <tool_call>}): where the rendering with the
   * calls leaves the text-only one ({@code text}, null without text: no separator).
   */
  private static String separator(String full, String text) {
    if (text == null) {
      return "";
    }
    int n = 0;
    while (n < Math.min(full.length(), text.length()) && full.charAt(n) == text.charAt(n)) {
      n++;
    }
    int end = n;
    while (end < full.length() && Character.isWhitespace(full.charAt(end))) {
      end++;
    }
    return full.substring(n, end);
  }

  /** How many leading tokens {@code whole} and {@code part} share, short of {@code part}'s last one. */
  private static int shared(int[] whole, int[] part) {
    int n = 0;
    while (n < Math.min(whole.length, part.length - 1) && whole[n] == part[n]) {
      n++;
    }
    return n;
  }

  private static String[] emptyDeltas(int n) {
    String[] deltas = new String[n];
    Arrays.fill(deltas, "");
    return deltas;
  }

  /**
   * Spreads {@code text}'s words over the tokens before {@code limit}: a word arrives with the token that
   * completes the encoding of {@code before} and the text up to it.
   */
  private void spread(String[] deltas, String before, String text, int floor, int limit) {
    int from = 0;
    while (from < text.length() && limit > 0) {
      int space = text.indexOf(' ', from + 1);
      int end = space < 0 ? text.length() : space;
      int t = Math.min(limit, tokenize.apply(before + text.substring(0, end)).length);
      deltas[Math.max(floor, t - 1)] += text.substring(from, end);
      from = end;
    }
  }

  /** {@code rendered}, which must extend the prompt's rendering (not null). */
  private static String required(String rendered) {
    if (rendered == null) {
      throw new PromptEncoder.Unsupported("the chat template renders the answer's history differently from the "
          + "prompt");
    }
    return rendered;
  }

  /** The rendering after the prompt's, or null when it does not extend the prompt. */
  private String suffix(Kind kind, JsonNode request, String promptText, ToolCallAnswer answer, boolean calls,
      boolean history) {
    ObjectNode body = ((ObjectNode) request).deepCopy();
    body.remove("vllm_xargs");
    ArrayNode messages = body.withArray("messages");
    messages.add(kind == Kind.MESSAGES ? anthropic(answer, calls) : chat(answer, calls));
    if (history) {
      messages.addObject().put("role", "user").put("content", "Go on.");
    }
    String full = render.apply(kind, body);
    return full.startsWith(promptText) ? full.substring(promptText.length()) : null;
  }

  /** {@code after} through its first end-of-turn token. */
  private int[] endOfTurn(int[] after) {
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
    if (!answer.reasoning().isEmpty()) {
      // as Claude Code resends a thinking block (the router's conversion makes it the message's reasoning)
      content.addObject().put("type", "thinking").put("thinking", answer.reasoning()).put("signature", "sim");
    }
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
    if (!answer.reasoning().isEmpty()) {
      assistant.put("reasoning", answer.reasoning()); // vLLM's field, which its chat preprocessing hands on
    }
    if (calls && !answer.calls().isEmpty()) {
      assistant.set("tool_calls", answer.chatToolCalls());
    }
    return assistant;
  }
}
