package dev.kvrouter.index.events;

/**
 * Settings of an {@link EventSubscriber}.
 *
 * @param shards event threads; each source is pinned to one (its events are applied in order there)
 * @param pollMillis longest a shard with no sockets parks before it looks at commands and timers (a shard with
 *     sockets reads them at least every 4 ms, see {@code EventSubscriber})
 * @param replayTimeoutMillis longest wait for each replay reply before the replay is abandoned
 * @param maxReplayBatches most batches accepted from one replay (the engine keeps 10 000 by default)
 * @param reconnectMillis first reconnect interval of SUB sockets (ZMQ backs off exponentially from here)
 * @param reconnectMaxMillis longest reconnect interval, also the longest bind retry interval
 * @param receiveHwm SUB receive high-water mark (messages)
 * @param tickMillis how often per-worker timers run (stale recovery)
 * @param receiveBudget most messages read from one socket before the shard serves its other sockets
 * @param handshakeMillis ZMQ handshake interval: a connection whose ZMTP handshake has not completed by then is
 *     closed and retried. JeroMQ 0.6.0 occasionally stalls a handshake forever (about 1 connection in 100 in
 *     our tests; zeromq/jeromq#849), which with the 30 s default leaves a socket deaf for 30 s
 * @param maxMessageBytes largest engine message read ({@code events.max_message_bytes}): ZMQ allocates a frame as
 *     its header claims, and holds up to {@code receiveHwm} of them, so a larger one drops the connection instead
 */
public record SubscriberConfig(
    int shards,
    int pollMillis,
    int replayTimeoutMillis,
    int maxReplayBatches,
    int reconnectMillis,
    int reconnectMaxMillis,
    int receiveHwm,
    int tickMillis,
    int receiveBudget,
    int handshakeMillis,
    int maxMessageBytes) {

  /**
   * 16 MiB: a vLLM batch is one engine step's events, its stores carrying the tokens of the blocks filled in that
   * step, at most {@code max_num_batched_tokens} per KV group (5 bytes a token id, 9 to 34 an engine hash per
   * block): an 8,192-token step is about 50 KB, and 16 MiB holds a step of over a million tokens in two groups.
   */
  public static final int DEFAULT_MAX_MESSAGE_BYTES = 16 << 20;
  /** Messages queued per engine connection: with the size limit, at most 16 GiB (see docs/operations.md). */
  public static final int DEFAULT_RECEIVE_HWM = 1000;

  public SubscriberConfig {
    if (shards < 1 || pollMillis < 1 || replayTimeoutMillis < 1 || maxReplayBatches < 1 || reconnectMillis < 1
        || reconnectMaxMillis < reconnectMillis || receiveHwm < 0 || tickMillis < 1 || receiveBudget < 1
        || handshakeMillis < 1 || maxMessageBytes < 1024) {
      throw new IllegalArgumentException("invalid subscriber config: " + this);
    }
  }

  /** Up to 4 shards (one per core), 20 ms polls, 2 s replay timeouts, 100 ms to 5 s reconnects, 1 s handshakes. */
  public static SubscriberConfig defaults() {
    int shards = Math.max(1, Math.min(4, Runtime.getRuntime().availableProcessors()));
    return new SubscriberConfig(shards, 20, 2000, 20_000, 100, 5000, DEFAULT_RECEIVE_HWM, 1000, 1024, 1000,
        DEFAULT_MAX_MESSAGE_BYTES);
  }

  public SubscriberConfig withShards(int n) {
    return new SubscriberConfig(n, pollMillis, replayTimeoutMillis, maxReplayBatches, reconnectMillis,
        reconnectMaxMillis, receiveHwm, tickMillis, receiveBudget, handshakeMillis, maxMessageBytes);
  }

  public SubscriberConfig withReplayTimeout(int millis) {
    return new SubscriberConfig(shards, pollMillis, millis, maxReplayBatches, reconnectMillis, reconnectMaxMillis,
        receiveHwm, tickMillis, receiveBudget, handshakeMillis, maxMessageBytes);
  }

  public SubscriberConfig withMaxMessageBytes(int bytes) {
    return new SubscriberConfig(shards, pollMillis, replayTimeoutMillis, maxReplayBatches, reconnectMillis,
        reconnectMaxMillis, receiveHwm, tickMillis, receiveBudget, handshakeMillis, bytes);
  }
}
