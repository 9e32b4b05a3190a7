package dev.kvrouter.examples.sim.engine;

/**
 * Receives one request's output. Called on the engine's owner thread, in order: {@link #onAccepted} once the
 * engine queued it, any number of {@link #onToken}, then exactly one of {@link #onFinished} or
 * {@link #onFailed} (a request refused at admission gets only {@link #onFailed}). Implementations must return
 * quickly and never block (the HTTP layer queues and writes on its own threads).
 */
public interface RequestObserver {

  /** The engine queued the request; it will run unless aborted or the engine dies. */
  default void onAccepted() {}

  /**
   * A token was generated.
   *
   * @param tokenId the token id
   * @param index its position in the output, from 0
   * @param atNanos clock time at the end of the step that produced it
   * @param cachedTokens the request's prompt tokens served from cache (known from the first token on)
   * @param last whether this is the last token ({@link #onFinished} follows at once)
   */
  void onToken(int tokenId, int index, long atNanos, int cachedTokens, boolean last);

  /** The request completed; the last token has been delivered already. */
  void onFinished(RequestOutcome outcome);

  /** The request failed; no further calls follow. */
  void onFailed(RequestFailure failure);
}
