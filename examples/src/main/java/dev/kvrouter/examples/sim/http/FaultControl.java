package dev.kvrouter.examples.sim.http;

import dev.kvrouter.examples.sim.events.EventFaults;

/** The fault knobs of one worker, as the admin endpoint sees them. Implementations are thread-safe. */
public interface FaultControl {

  /**
   * The current fault settings.
   *
   * @param events event-plane faults
   * @param slowdown multiplier on every step's duration (1 = nominal)
   * @param up whether the engine process is up
   */
  record State(EventFaults events, double slowdown, boolean up) {}

  /**
   * A partial change; {@code null} fields are left as they are.
   *
   * @param dropRate see {@link EventFaults#dropRate()}
   * @param delayMillis see {@link EventFaults#delayMillis()}
   * @param reorderRate see {@link EventFaults#reorderRate()}
   * @param stopPublishing see {@link EventFaults#stopped()}
   * @param slowdown step-time multiplier, positive
   * @param crashDownMillis when set, crash the engine now and restart it after this many milliseconds
   */
  record Update(Double dropRate, Long delayMillis, Double reorderRate, Boolean stopPublishing, Double slowdown,
      Long crashDownMillis) {

    public static final Update NONE = new Update(null, null, null, null, null, null);
  }

  State state();

  /** Validates and applies {@code update}; returns the state after it. */
  State apply(Update update);
}
