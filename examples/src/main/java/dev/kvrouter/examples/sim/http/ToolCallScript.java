package dev.kvrouter.examples.sim.http;

import dev.kvrouter.examples.workload.ToolCallAnswer;

/**
 * What the model generates for a scripted tool-call answer ({@link ToolCallAnswer}): the chat template's own
 * rendering of the assistant message with its tool calls, from the end of the generation prompt through the
 * end-of-turn token, tokenized. So the history a client resends (the text and {@code tool_use} blocks it received)
 * renders to the prompt plus exactly these tokens, which the worker's KV cache holds after the turn.
 *
 * @param answer the scripted answer
 * @param tokens the generated tokens, the last one the end of turn
 * @param reasoningTokens how many leading tokens are the think block (0 when the request has thinking off or the
 *     answer no reasoning): vLLM's reasoning parser returns them as reasoning, not content
 * @param textTokens how many leading tokens are the think block and the answer's text (the text streamed as text);
 *     the rest are the calls, which vLLM's tool parser withholds until they parse
 * @param deltas the text each generated token streams: the reasoning's words, then the text's, each with the token
 *     that completes it ({@code ""} for the others and for every call token)
 * @param separator what the template writes between the text and the calls (Qwen3's {@code \n}; {@code ""} without
 *     text), the first call tokens': vLLM's hermes tool parser returns it at the end of a chat answer's
 *     {@code content}
 */
public record ToolCallScript(ToolCallAnswer answer, int[] tokens, int reasoningTokens, int textTokens,
    String[] deltas, String separator) {

  /** Whether generated token {@code index} is the think block's (its delta is reasoning). */
  public boolean reasoning(int index) {
    return index < reasoningTokens;
  }

  /** The text a client holds after the first {@code generated} tokens arrived. */
  public String textReceived(int generated) {
    return received(reasoningTokens, generated);
  }

  /** The reasoning a client holds after the first {@code generated} tokens arrived. */
  public String reasoningReceived(int generated) {
    return received(0, Math.min(generated, reasoningTokens));
  }

  private String received(int from, int to) {
    StringBuilder b = new StringBuilder();
    for (int i = from; i < Math.min(to, deltas.length); i++) {
      b.append(deltas[i]);
    }
    return b.toString();
  }
}
