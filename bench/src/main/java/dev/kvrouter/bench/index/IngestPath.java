package dev.kvrouter.bench.index;

import dev.kvrouter.index.events.EventApplier;
import dev.kvrouter.index.wire.EventDecoder;

/**
 * The event thread's per-message work as the ingestion harnesses call it: decode a payload and apply it to one
 * worker's view. One place, so every harness measures the path the subscriber runs.
 */
final class IngestPath {

  private final EventApplier applier;
  private final EventDecoder decoder = new EventDecoder();

  IngestPath(EventApplier applier) {
    this.applier = applier;
  }

  /** Decode and apply one payload (what {@code StreamFollower} does per message). */
  int apply(byte[] payload) {
    return applier.apply(decoder.decode(payload));
  }

  /** Decode only; returns something derived from the result so the work is not dead. */
  int decode(byte[] payload) {
    return decoder.decode(payload).events().size();
  }
}
