package dev.kvrouter.examples.workload;

import java.util.List;
import java.util.Map;

/**
 * A coding agent's answer as {@code multi-turn:format=messages} scripts it: text, then one {@code tool_use}, both
 * named by the turn's answer segment ({@link WorkloadRequest#answer}), so the request that asks for it, the history
 * that resends it and the engines that generate it all derive the same words from the same seed.
 *
 * @param text the text block's words (the answer's own seed, so a shorter one is a prefix)
 * @param input the tool call's input words (its first parameter's value)
 */
public record AgentAnswer(Segment text, Segment input) {

  /** The answer scripted by {@code reply}: three quarters text, a quarter tool input (at least a word each). */
  public static AgentAnswer of(Segment reply) {
    Segment input = new Segment(Rng.derive(reply.seed(), 14), Math.max(1, reply.length() / 4));
    return new AgentAnswer(new Segment(reply.seed(), Math.max(1, reply.length() - input.length())), input);
  }

  /** The assistant message the history resends: the text segment, then the tool input. */
  public Message message() {
    return Message.of("assistant", text, input);
  }

  /** The answer as the client scripts it for the worker ({@link ToolCallAnswer}, in {@code vllm_xargs}). */
  public ToolCallAnswer script(List<AgentTools.Tool> tools, TokenSpace space) {
    return new ToolCallAnswer(ChatText.render(List.of(text), space), List.of(AgentTools.toolCall(tools, input,
        space)));
  }

  /**
   * Records what a client holds of this answer when it did not get all of it, for {@link Prompt#withAnswersCut}:
   * the first {@code words} words of the text, and the tool call only if {@code call} (a call cut by
   * {@code max_tokens}, or a failed turn, never reaches the client, so the history resends the text alone).
   */
  public void received(int words, boolean call, Map<Long, Integer> receivedShort) {
    if (words < text.length()) {
      receivedShort.put(text.seed(), Math.max(0, words));
    }
    if (!call) {
      receivedShort.put(input.seed(), 0);
    }
  }
}
