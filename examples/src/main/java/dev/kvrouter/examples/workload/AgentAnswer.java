package dev.kvrouter.examples.workload;

import java.util.List;
import java.util.Map;

/**
 * A coding agent's answer as {@code multi-turn:format=messages} scripts it: optionally a reasoning model's thinking,
 * then text, then one {@code tool_use}, all named by the turn's answer segment ({@link WorkloadRequest#answer}), so
 * the request that asks for it, the history that resends it and the engines that generate it all derive the same
 * words from the same seed.
 *
 * @param text the text block's words (the answer's own seed, so a shorter one is a prefix)
 * @param input the tool call's input words (its first parameter's value)
 * @param reasoning the thinking's words (length 0: no thinking), which a worker generates as the template's think
 *     block when the request leaves thinking on and the client resends as a {@code thinking} block
 */
public record AgentAnswer(Segment text, Segment input, Segment reasoning) {

  /** The answer scripted by {@code reply}, without thinking. */
  public static AgentAnswer of(Segment reply) {
    return of(reply, 0);
  }

  /**
   * The answer scripted by {@code reply}: three quarters text, a quarter tool input (at least a word each), and
   * {@code reasoningWords} words of thinking before them (their own seed, so the text and call do not change).
   */
  public static AgentAnswer of(Segment reply, int reasoningWords) {
    Segment input = new Segment(Rng.derive(reply.seed(), 14), Math.max(1, reply.length() / 4));
    return new AgentAnswer(new Segment(reply.seed(), Math.max(1, reply.length() - input.length())), input,
        thinking(reply, reasoningWords));
  }

  /** The {@code words} of thinking before the answer {@code reply} names (its own seed, so the text does not change). */
  public static Segment thinking(Segment reply, int words) {
    return new Segment(Rng.derive(reply.seed(), 17), words);
  }

  /**
   * A reasoning model's chat answer ({@code multi-turn:format=chat,reasoning=N}) as the client scripts it: the
   * thinking, then {@code reply}'s text, and no call, so the model ends its turn after the text.
   */
  public static ToolCallAnswer chatScript(Segment reply, int reasoningWords, TokenSpace space) {
    return new ToolCallAnswer(ChatText.render(List.of(thinking(reply, reasoningWords)), space),
        ChatText.render(List.of(reply), space), List.of());
  }

  /**
   * Records what a chat client holds of a thinking answer {@code reply} when it did not get all of it: the first
   * {@code words} words of the text, and the thinking only once the text began (as {@link #received} for a coding
   * agent's).
   */
  public static void chatReceived(Segment reply, int reasoningWords, int words, Map<Long, Integer> receivedShort) {
    if (words <= 0) {
      receivedShort.put(thinking(reply, reasoningWords).seed(), 0);
    }
    if (words < reply.length()) {
      receivedShort.put(reply.seed(), Math.max(0, words));
    }
  }

  /**
   * The assistant message the history resends: the text segment, then the tool input, then (only with thinking,
   * so answers without it keep their shape) the reasoning.
   */
  public Message message() {
    return reasoning.length() == 0 ? Message.of("assistant", text, input)
        : Message.of("assistant", text, input, reasoning);
  }

  /** The answer as the client scripts it for the worker ({@link ToolCallAnswer}, in {@code vllm_xargs}). */
  public ToolCallAnswer script(List<AgentTools.Tool> tools, TokenSpace space) {
    return new ToolCallAnswer(reasoning.length() == 0 ? "" : ChatText.render(List.of(reasoning), space),
        ChatText.render(List.of(text), space), List.of(AgentTools.toolCall(tools, input, space)));
  }

  /**
   * Records what a client holds of this answer when it did not get all of it, for {@link Prompt#withAnswersCut}:
   * the first {@code words} words of the text, and the tool call only if {@code call} (a call cut by
   * {@code max_tokens}, or a failed turn, never reaches the client, so the history resends the text alone). The
   * thinking is resent whole once the text began (vLLM closes the thinking block, with its signature, before the
   * text), else not at all.
   */
  public void received(int words, boolean call, Map<Long, Integer> receivedShort) {
    if (reasoning.length() > 0 && words <= 0 && !call) {
      receivedShort.put(reasoning.seed(), 0);
    }
    if (words < text.length()) {
      receivedShort.put(text.seed(), Math.max(0, words));
    }
    if (!call) {
      receivedShort.put(input.seed(), 0);
    }
  }
}
