package dev.kvrouter.index.events;

import dev.kvrouter.index.wire.EventBuffer;
import dev.kvrouter.index.wire.EventDecoder;
import dev.kvrouter.index.wire.FastEventReader;
import dev.kvrouter.index.wire.MalformedEventException;
import java.time.Clock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Follows one publisher's sequence numbers and applies its batches in order: the protocol logic of the event
 * plane, free of sockets so it can be tested alone.
 *
 * <ul>
 *   <li>The first message of a publisher lifetime with {@code seq > 0} means we joined late: with replay, ask
 *       for everything from 0 (the engine keeps its last {@code buffer_steps} batches); without, start from
 *       here (the view misses older blocks but claims nothing false).
 *   <li>{@code seq > last + 1} is a gap: replay from {@code last + 1}; what replay cannot return is counted as
 *       dropped and makes the view stale (a lost remove would leave a block we wrongly claim).
 *   <li>A live {@code seq} at or below the previous live one means the engine restarted (sequence numbers
 *       restart at 0 with an empty cache): clear the worker and start a new lifetime with this message. A
 *       reordered stream (never seen on one ZMQ connection, but a simulator can do it) looks the same and is
 *       treated the same: with replay the view is rebuilt exactly, without it the view restarts empty.
 *   <li>Live messages a replay already applied are skipped.
 *   <li>A malformed batch is counted, dropped and, since its events are lost, makes the view stale.
 * </ul>
 *
 * <p>Payloads are read by {@link FastEventReader} into a reused {@link EventBuffer}; what it does not take (an
 * unusual shape, or a malformed payload) goes to the {@link EventDecoder}, which decides and explains.
 *
 * <p>Not thread-safe: owned by the worker's event thread, like the applier it drives.
 */
final class StreamFollower {

  private static final Logger log = LoggerFactory.getLogger(StreamFollower.class);

  /** Fetches batches from {@code fromSeq} on; calls {@code sink} in order; returns whether the end marker came. */
  interface Replayer {
    boolean replay(long fromSeq, BatchSink sink);
  }

  interface BatchSink {
    void accept(long seq, byte[] payload);
  }

  private final EventApplier applier;
  private final WorkerEventHealth health;
  private final EventDecoder decoder;
  private final FastEventReader fastReader = new FastEventReader();
  private final EventBuffer buffer = new EventBuffer();
  private final Replayer replayer;
  private final Clock clock;
  private final Integer expectedRank;
  /** Last sequence applied (live or replayed) in this lifetime, -1 before the first. */
  private long last = -1;
  /** Last sequence received live, -1 before the first. */
  private long lastLive = -1;
  /** Whether this lifetime has been followed from seq 0 without loss, so an unknown parent is unexpected. */
  private boolean complete;
  private long evictionsAtStart;
  private long firstReplayed = -1;
  /** The buffer's size as last told to {@link #health}. */
  private long bufferBytes = -1;

  StreamFollower(EventApplier applier, WorkerEventHealth health, EventDecoder decoder, Replayer replayer,
      Clock clock, Integer expectedRank) {
    this.applier = applier;
    this.health = health;
    this.decoder = decoder;
    this.replayer = replayer;
    this.clock = clock;
    this.expectedRank = expectedRank;
  }

  /** A live message from the SUB socket. */
  void onLive(long seq, byte[] payload) {
    // Compare with the last live message, not the last applied one: a replay may have applied batches the
    // SUB socket still delivers afterwards, and those are duplicates, not a restart.
    if (lastLive >= 0 && Long.compareUnsigned(seq, lastLive) <= 0) {
      health.inc(EventCounter.RESETS);
      log.info("event stream of {} restarted (seq {} after {}); clearing its view", health.id(), seq, lastLive);
      applier.view().reset();
      last = -1;
      health.resetSeq();
      health.markFresh("publisher restarted, view cleared");
    }
    lastLive = seq;
    if (last < 0) {
      startLifetime(seq);
    } else if (seq > last + 1) {
      health.inc(EventCounter.GAPS);
      if (replayer != null) {
        replay(last + 1);
      }
      if (seq > last + 1) {
        lost(seq - last - 1, "sequence gap " + (last + 1) + ".." + (seq - 1) + " not recovered");
      }
    }
    if (seq > last) {
      apply(seq, payload);
    }
  }

  private void startLifetime(long seq) {
    complete = seq == 0;
    evictionsAtStart = applier.view().evictions();
    if (seq > 0 && replayer != null) {
      replay(0);
      complete = last >= 0 && firstReplayed == 0 && last >= seq - 1;
      if (last >= 0 && seq > last + 1) {
        lost(seq - last - 1, "replay from 0 ended at " + last + ", live stream at " + seq);
      }
    }
  }

  private void replay(long from) {
    firstReplayed = -1;
    boolean ended = replayer.replay(from, (s, p) -> {
      if (firstReplayed < 0) {
        firstReplayed = s;
      }
      if (last >= 0 && s <= last) {
        return; // already applied
      }
      if (last >= 0 && s > last + 1) {
        lost(s - last - 1, "replay skipped " + (last + 1) + ".." + (s - 1));
      }
      apply(s, p);
    });
    health.inc(ended ? EventCounter.REPLAYS : EventCounter.REPLAY_FAILURES);
  }

  private void lost(long batches, String why) {
    health.add(EventCounter.DROPPED_BATCHES, batches);
    complete = false;
    health.markStale(why, clock.millis());
  }

  private void apply(long seq, byte[] payload) {
    long now = clock.millis();
    last = seq;
    EventBuffer batch = buffer;
    if (!fastReader.read(payload, batch)) {
      try {
        batch.load(decoder.decode(payload));
      } catch (MalformedEventException e) {
        health.inc(EventCounter.MALFORMED);
        lost(1, "undecodable batch " + seq + ": " + e.getMessage());
        return;
      }
    }
    health.inc(EventCounter.BATCHES);
    health.received(now, batch.ts(), seq);
    if (batch.footprintBytes() != bufferBytes) {
      bufferBytes = batch.footprintBytes();
      health.bufferBytes(bufferBytes);
    }
    if (expectedRank != null && batch.dataParallelRank() != null
        && !expectedRank.equals(batch.dataParallelRank())) {
      health.inc(EventCounter.DP_RANK_MISMATCH);
    }
    boolean hadClear = false;
    for (int e = 0, n = batch.size(); e < n; e++) {
      hadClear |= batch.kind(e) == EventBuffer.CLEARED;
    }
    int unknownParents = applier.apply(batch);
    if (hadClear && unknownParents == 0) {
      // the engine emptied its cache: whatever we missed before no longer matters
      complete = true;
      evictionsAtStart = applier.view().evictions();
      health.markFresh("engine cleared its cache");
    }
    if (unknownParents > 0 && complete && applier.view().evictions() == evictionsAtStart) {
      health.markStale(unknownParents + " store(s) with an unknown parent on a complete stream", now);
    }
  }

  long lastSeq() {
    return last;
  }
}
