package dev.kvrouter.examples.workload;

import java.util.Objects;

/**
 * One request of a workload, before any transport: when it arrives, what it asks and how much it generates.
 * Token ids and chat text are produced on demand by {@link Workload#promptTokens} and
 * {@link Workload#chatMessages}, so a 60-million-token trace costs only its segment lists in memory.
 *
 * @param index position in arrival order (ties keep generation order)
 * @param id stable id, unique in the workload
 * @param arrivalMicros arrival time from the start of the run: when the client plans to send it; a request with
 *     {@code after} is sent no earlier than that request finished (closed loop)
 * @param sessionId conversation, sibling group or trace-less grouping key, or {@code null}
 * @param prompt the prompt as segments
 * @param outputTokens tokens to generate ({@code max_tokens}, sent with {@code ignore_eos})
 * @param answer the model's answer as the workload scripts it ({@code outputTokens} long), or {@code null} when
 *     the engine picks its own tokens. Later prompts of the session contain this segment, so a driver whose engine
 *     generates exactly these tokens (the simulated model, as greedy decoding would) makes the resent history the
 *     model's own answer
 * @param after id of the request whose answer the client waits for before sending this one (the previous turn of
 *     its conversation), or {@code null}: open loop
 * @param reasoning words of thinking a reasoning model's scripted answer opens with ({@link AgentAnswer#thinking}),
 *     0 for none; a chat answer with thinking ends its own turn ({@link #maxTokens})
 */
public record WorkloadRequest(int index, String id, long arrivalMicros, String sessionId, Prompt prompt,
    int outputTokens, Segment answer, String after, int reasoning) {

  public WorkloadRequest {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(prompt, "prompt");
    if (arrivalMicros < 0) {
      throw new IllegalArgumentException("arrival must be >= 0, was " + arrivalMicros);
    }
    if (outputTokens < 1) {
      throw new IllegalArgumentException("outputTokens must be >= 1, was " + outputTokens);
    }
    if (answer != null && answer.length() != outputTokens) {
      throw new IllegalArgumentException("a scripted answer must be outputTokens (" + outputTokens + ") long, was "
          + answer.length());
    }
    if (id.equals(after)) {
      throw new IllegalArgumentException(id + " cannot wait for itself");
    }
    if (reasoning < 0 || (reasoning > 0 && answer == null)) {
      throw new IllegalArgumentException("reasoning must be >= 0, and only a scripted answer has it");
    }
  }

  /** A request whose scripted answer, if any, has no thinking. */
  public WorkloadRequest(int index, String id, long arrivalMicros, String sessionId, Prompt prompt,
      int outputTokens, Segment answer, String after) {
    this(index, id, arrivalMicros, sessionId, prompt, outputTokens, answer, after, 0);
  }

  /** An open-loop request whose output the engine picks. */
  public WorkloadRequest(int index, String id, long arrivalMicros, String sessionId, Prompt prompt,
      int outputTokens) {
    this(index, id, arrivalMicros, sessionId, prompt, outputTokens, null, null);
  }

  /**
   * What an engine generates of {@code script} (the tokens the model would emit, a chat answer's ending with its end
   * of turn) under this request's {@code max_tokens}: all of it when it fits, else its first {@code outputTokens},
   * as vLLM's stop check cuts a model that would say more ({@code finish_reason: "length"}). A scripted chat answer
   * of {@code outputTokens} words is at least one token longer (its end of turn), so it is always cut there: the
   * request sends {@code ignore_eos} and {@code max_tokens} as a benchmark client does, and vLLM would generate
   * exactly {@code max_tokens}.
   */
  public int[] generated(int[] script) {
    int max = maxTokens();
    return script.length <= max ? script : java.util.Arrays.copyOf(script, max);
  }

  /**
   * The {@code max_tokens} the request is sent with: {@code outputTokens}, except for a coding agent's scripted answer
   * ({@link AgentAnswer}), which is sent with Claude Code's {@link AgentTools#MAX_TOKENS} and ends at its own end of
   * turn: the tool call must arrive whole for the history to resend it; so does a scripted answer with thinking,
   * whose think block's length in tokens only the model's template and tokenizer know.
   */
  public int maxTokens() {
    return answer != null && (prompt.format() == Prompt.Format.MESSAGES || reasoning > 0) ? AgentTools.MAX_TOKENS
        : outputTokens;
  }

  WorkloadRequest withIndex(int i, long arrival) {
    return new WorkloadRequest(i, id, arrival, sessionId, prompt, outputTokens, answer, after, reasoning);
  }
}
