package dev.kvrouter.extproc.routing;

import dev.kvrouter.xds.registry.Worker;
import java.util.List;

/**
 * Chooses one worker among those eligible for a request.
 *
 * <p>Called concurrently from request threads. Implementations only read shared state (index, load
 * snapshots); any bookkeeping goes through the owner of that state, never through locks on this path.
 */
public interface RoutingPolicy {

  /** Short stable name used in decision records, metrics and {@code x-kvrouter-policy}. */
  String name();

  /**
   * @param request the request
   * @param eligible non-empty, in registry order
   * @return the chosen worker and why
   */
  Choice choose(RouteRequest request, List<Worker> eligible);

  /** A policy's pick and its reason (a short token such as {@code round_robin} or {@code cache_hit}). */
  record Choice(Worker worker, String reason) {}
}
