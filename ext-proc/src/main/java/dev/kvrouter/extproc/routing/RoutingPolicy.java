package dev.kvrouter.extproc.routing;

/**
 * Chooses one worker among those eligible for a request.
 *
 * <p>Called concurrently from request threads. Implementations only read the {@link Scoring} they are given
 * (and their own lock-free state, such as a round-robin counter); load bookkeeping happens in the
 * {@link Router} after the choice, never here.
 */
public interface RoutingPolicy {

  /** Short stable name used in decision records, metrics and {@code x-kvrouter-policy}. */
  String name();

  /** @return the chosen candidate (one of {@code s.candidates()}) and why */
  Choice choose(Scoring s);

  /**
   * The weights the router scores the candidates with for this policy: the model's (with any trusted per-request
   * override) unless the policy fixes its own, as the anchors' {@code dynamo} does.
   */
  default Weights weights(Weights configured) {
    return configured;
  }

  /**
   * A policy's pick and its reason, a short token: {@code lowest_cost}, {@code softmax}, {@code imbalance_gate},
   * {@code bounded_load}, {@code load_only}, {@code least_load}, {@code max_overlap}, {@code no_overlap},
   * {@code random}, {@code round_robin}, {@code max_score}.
   */
  record Choice(Candidate candidate, String reason) {}
}
