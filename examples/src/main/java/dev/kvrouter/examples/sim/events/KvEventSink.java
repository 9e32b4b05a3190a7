package dev.kvrouter.examples.sim.events;

import dev.kvrouter.index.wire.EventBatch;

/**
 * Where a simulated engine publishes its KV events: the ZMQ publisher in a real worker, an in-process consumer
 * in virtual time, a recorder in tests.
 *
 * <p>Called only from the engine's owner thread, once per step that produced events; implementations must not
 * block (hand off to their own thread if they do I/O).
 */
public interface KvEventSink extends AutoCloseable {

  /** Publishes one step's events. */
  void publish(EventBatch batch);

  /**
   * The engine process restarted: a new publisher lifetime begins (its sequence numbers start again at 0 and
   * its replay buffer is empty), as when a vLLM process is restarted.
   */
  default void restart() {}

  /** The engine process died: a real publisher's sockets close with it. Nothing is published until restart. */
  default void crashed() {}

  /** Applies event-plane fault injection; sinks that cannot inject faults reject non-default settings. */
  default void setFaults(EventFaults faults) {
    if (!faults.equals(EventFaults.NONE)) {
      throw new UnsupportedOperationException(getClass().getSimpleName() + " cannot inject event faults");
    }
  }

  @Override
  default void close() {}

  /** A sink that drops everything (events disabled). */
  static KvEventSink discarding() {
    return batch -> {};
  }
}
