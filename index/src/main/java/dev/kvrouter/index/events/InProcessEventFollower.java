package dev.kvrouter.index.events;

import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.WorkerView;
import dev.kvrouter.index.wire.EventDecoder;
import java.time.Clock;
import java.util.Objects;

/**
 * Follows one worker's event stream delivered in process rather than over ZMQ (a virtual-time simulator, a
 * test): the same decoder, sequence rules ({@link StreamFollower}: late join, gaps, replay, restarts, stale)
 * and {@link EventApplier} as the {@link EventSubscriber}, without sockets. Registers the worker's view like
 * the subscriber does.
 *
 * <p>Not thread-safe: owned by the thread that delivers the stream, as a subscriber shard owns its sources.
 */
public final class InProcessEventFollower {

  /** Answers a replay request like the engine's ROUTER socket. */
  @FunctionalInterface
  public interface Replay {
    /**
     * Delivers every buffered batch numbered {@code fromSeq} or later to {@code sink}, in order.
     *
     * @return whether the end marker came (false: the replay failed or timed out)
     */
    boolean replay(long fromSeq, Sink sink);
  }

  /** Receives replayed batches. */
  @FunctionalInterface
  public interface Sink {
    void accept(long seq, byte[] payload);
  }

  private final StreamFollower follower;
  private final WorkerEventHealth health;
  private final WorkerView view;

  /**
   * @param source the stream (its endpoints are not used; its id, model and block size are)
   * @param replay the engine's replay, or null when it has none (gaps then make the view stale)
   */
  public InProcessEventFollower(KvIndex index, EventPlaneHealth planeHealth, EventSource source, Replay replay,
      Clock clock) {
    Objects.requireNonNull(source, "source");
    view = index.register(source.id());
    view.setEventStream(true);
    if (source.notPrefixClosed()) {
      view.markNotPrefixClosed("configured (events.walk_models)");
    }
    health = planeHealth.register(view);
    EventApplier applier = new EventApplier(view, source.model(), source.blockSize(), health);
    StreamFollower.Replayer r = replay == null ? null : (from, sink) -> replay.replay(from, sink::accept);
    follower = new StreamFollower(applier, health, new EventDecoder(), r, clock, source.id().dpRank());
  }

  /** A live batch as the SUB socket would deliver it: the publisher's sequence number and the payload. */
  public void onLive(long seq, byte[] payload) {
    follower.onLive(seq, payload);
  }

  /**
   * Lets a stale view recover after the plane's quiet period, as the subscriber's poll loop does between
   * messages; call it periodically.
   */
  public void tick(long nowMillis) {
    health.tick(nowMillis);
  }

  public WorkerEventHealth health() {
    return health;
  }

  public WorkerView view() {
    return view;
  }
}
