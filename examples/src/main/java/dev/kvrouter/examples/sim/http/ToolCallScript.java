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
 * @param textTokens how many leading tokens are the answer's text (streamed as text); the rest are the calls, which
 *     vLLM's tool parser withholds until they parse
 * @param deltas the text each generated token streams: the text's words, each with the token that completes it
 *     ({@code ""} for the others and for every call token)
 */
public record ToolCallScript(ToolCallAnswer answer, int[] tokens, int textTokens, String[] deltas) {

  /** The text a client holds after the first {@code generated} tokens arrived. */
  public String textReceived(int generated) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < Math.min(generated, deltas.length); i++) {
      b.append(deltas[i]);
    }
    return b.toString();
  }
}
