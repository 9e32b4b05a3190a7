package dev.kvrouter.bench.index;

import dev.kvrouter.index.events.EventApplier;
import dev.kvrouter.index.wire.EventBuffer;
import dev.kvrouter.index.wire.EventDecoder;
import dev.kvrouter.index.wire.FastEventReader;

/**
 * The event thread's per-message work as the ingestion harnesses call it: read a payload (the fast reader, the
 * general decoder for what it declines) and apply it to one worker's view, as {@code StreamFollower} does. One
 * place, so every harness measures the path the subscriber runs.
 */
final class IngestPath {

  private final EventApplier applier;
  private final EventDecoder decoder = new EventDecoder();
  private final FastEventReader reader = new FastEventReader();
  private final EventBuffer buffer = new EventBuffer();

  IngestPath(EventApplier applier) {
    this.applier = applier;
  }

  /** Read and apply one payload. */
  int apply(byte[] payload) {
    return applier.apply(read(payload));
  }

  /** Read only; returns something derived from the result so the work is not dead. */
  int decode(byte[] payload) {
    return read(payload).size();
  }

  private EventBuffer read(byte[] payload) {
    return reader.read(payload, buffer) ? buffer : buffer.load(decoder.decode(payload));
  }
}
