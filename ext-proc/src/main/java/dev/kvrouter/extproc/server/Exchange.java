package dev.kvrouter.extproc.server;

import dev.kvrouter.extproc.routing.Decision;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One routed request as its two ext_proc streams share it: the routing stream, which the shipped Envoy configs
 * keep open until the HTTP exchange is over (the routing filter asks for response trailers, so Envoy has a
 * reason not to close it after the request phases), and the response observer, which may stop following the
 * response after its first chunk and leave the end to the routing stream.
 *
 * <p>Why the observer leaves: in {@code observability_mode} Envoy sends every response chunk, one gRPC message
 * per streamed token, each costing the router more than everything else it does for the request. The load
 * ledger needs only the first chunk (the prefill is over) and the end; only the truth check needs the last chunk,
 * whose {@code usage} holds the engine's cached-token count, and a sample of responses is enough for it.
 *
 * <p>The observer may leave only while the routing stream is open: an Envoy that closed it early (a config
 * without response trailers on the routing filter closes it as soon as the request phases are done) would never
 * report the end, so there the observer follows every response to its end, as it always did.
 */
final class Exchange {

  private static final int OBSERVER_LEFT = 1;
  private static final int ENDED = 2;

  private final Decision decision;
  private final AtomicInteger state = new AtomicInteger();
  /**
   * The response observer took it ({@link InFlight#claimByObserver}): a routing stream that sees the response phases
   * too leaves them to the observer. Written before the claim removes the entry, so a routing stream whose own claim
   * fails reads it set.
   */
  private volatile boolean observed;

  Exchange(Decision decision) {
    this.decision = decision;
  }

  Decision decision() {
    return decision;
  }

  void observed() {
    observed = true;
  }

  boolean isObserved() {
    return observed;
  }

  /**
   * The observer stops following the response, if the routing stream is still open to report its end. Returns
   * false if Envoy already closed it: the observer must follow the response to its end itself.
   */
  boolean tryLeave() {
    return state.compareAndSet(0, OBSERVER_LEFT);
  }

  /**
   * Envoy closed the routing stream. Returns true if the observer had left, so the caller reports the end (the
   * HTTP exchange is over); false if the observer follows the response to its end, or never came.
   */
  boolean exchangeEnded() {
    return (state.getAndUpdate(s -> s | ENDED) & OBSERVER_LEFT) != 0;
  }
}
