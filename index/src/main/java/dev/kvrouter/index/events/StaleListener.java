package dev.kvrouter.index.events;

import dev.kvrouter.index.WorkerId;

/**
 * Told when a worker's event view becomes stale or fresh again, so the router can fall back visibly.
 *
 * <p>Called on the event thread that detected the change: implementations must be quick and must not block
 * (record the change and return).
 */
@FunctionalInterface
public interface StaleListener {

  void staleChanged(WorkerId worker, boolean stale, String reason);
}
