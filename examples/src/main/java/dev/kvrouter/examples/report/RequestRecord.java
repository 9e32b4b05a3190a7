package dev.kvrouter.examples.report;

/**
 * What happened to one request of a run, as seen by the client (or by the virtual-time driver). Times are
 * microseconds; {@code -1} (or {@code null}) means "did not happen / not reported".
 *
 * @param index the request's index in the workload
 * @param requestId the workload's request id
 * @param sessionId the workload's session or group, or null
 * @param scheduledMicros planned arrival, from the start of the run; through HTTP, a closed-loop turn held for its
 *     previous turn is due when that one completed (so sent minus scheduled stays the driver's own lag)
 * @param sentMicros when it was actually sent, from the start of the run; -1 if never sent
 * @param ttftMicros from send to the first chunk with content
 * @param e2eMicros from send to the end of the response (for a failed request: to the failure)
 * @param status HTTP status, 0 if there was no response
 * @param error null when the request succeeded, else a short kind: {@code overflow} (in-flight cap),
 *     {@code not_sent} (run-time cap), {@code http_<status>}, {@code timeout}, {@code connect}, {@code io},
 *     {@code stream_error}, {@code incomplete}, {@code aborted}
 * @param servedBy the worker that served it ({@code x-kvrouter-served-by}), or null
 * @param decisionId the router's decision id ({@code x-kvrouter-decision}), or null
 * @param promptTokens {@code usage.prompt_tokens}
 * @param cachedTokens {@code usage.prompt_tokens_details.cached_tokens}
 * @param completionTokens {@code usage.completion_tokens}
 * @param contentChunks stream chunks that carried content
 * @param itlMaxMicros the longest gap between content chunks
 */
public record RequestRecord(int index, String requestId, String sessionId, long scheduledMicros, long sentMicros,
    long ttftMicros, long e2eMicros, int status, String error, String servedBy, String decisionId,
    int promptTokens, int cachedTokens, int completionTokens, int contentChunks, long itlMaxMicros) {

  public boolean ok() {
    return error == null;
  }

  /** A request the driver never sent, with the reason. */
  public static RequestRecord unsent(int index, String requestId, String sessionId, long scheduledMicros,
      String error) {
    return new RequestRecord(index, requestId, sessionId, scheduledMicros, -1, -1, -1, 0, error, null, null, -1, -1,
        -1, 0, -1);
  }
}
