package dev.kvrouter.examples.sim.events;

import dev.kvrouter.index.wire.EventBatch;

/**
 * A batch as a subscriber receives it: with the publisher's sequence number (from 0 per publisher lifetime).
 *
 * @param seq the sequence number
 * @param batch the events
 */
public record SequencedKvEventBatch(long seq, EventBatch batch) {}
