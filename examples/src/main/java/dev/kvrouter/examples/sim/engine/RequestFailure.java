package dev.kvrouter.examples.sim.engine;

/**
 * A request the engine could not complete.
 *
 * @param id the request id
 * @param kind what went wrong
 * @param message a description safe to return to the client (no prompt content)
 */
public record RequestFailure(String id, Kind kind, String message) {

  /** Failure kinds, each with the HTTP status an OpenAI server would answer. */
  public enum Kind {
    /** The request is invalid for this engine (too long, unknown adapter, bad token id). */
    INVALID(400),
    /** The waiting queue is full. */
    OVERLOADED(503),
    /** The engine is down (crashed, restarting). */
    UNAVAILABLE(503),
    /** The engine crashed while the request was in flight. */
    ENGINE_DEAD(500),
    /** The client went away or cancelled. */
    ABORTED(499);

    private final int httpStatus;

    Kind(int httpStatus) {
      this.httpStatus = httpStatus;
    }

    public int httpStatus() {
      return httpStatus;
    }
  }
}
