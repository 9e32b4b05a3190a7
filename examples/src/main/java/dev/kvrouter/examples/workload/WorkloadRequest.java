package dev.kvrouter.examples.workload;

import java.util.Objects;

/**
 * One request of a workload, before any transport: when it arrives, what it asks and how much it generates.
 * Token ids and chat text are produced on demand by {@link Workload#promptTokens} and
 * {@link Workload#chatMessages}, so a 60-million-token trace costs only its segment lists in memory.
 *
 * @param index position in arrival order (ties keep generation order)
 * @param id stable id, unique in the workload
 * @param arrivalMicros arrival time from the start of the run
 * @param sessionId conversation, sibling group or trace-less grouping key, or {@code null}
 * @param prompt the prompt as segments
 * @param outputTokens tokens to generate ({@code max_tokens}, sent with {@code ignore_eos})
 */
public record WorkloadRequest(int index, String id, long arrivalMicros, String sessionId, Prompt prompt,
    int outputTokens) {

  public WorkloadRequest {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(prompt, "prompt");
    if (arrivalMicros < 0) {
      throw new IllegalArgumentException("arrival must be >= 0, was " + arrivalMicros);
    }
    if (outputTokens < 1) {
      throw new IllegalArgumentException("outputTokens must be >= 1, was " + outputTokens);
    }
  }

  WorkloadRequest withIndex(int i, long arrival) {
    return new WorkloadRequest(i, id, arrival, sessionId, prompt, outputTokens);
  }
}
