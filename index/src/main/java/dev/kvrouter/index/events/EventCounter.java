package dev.kvrouter.index.events;

/** Per-worker event-plane counters, each exported as {@code kvrouter_events_<name>_total{worker, dp_rank, ...}}. */
public enum EventCounter {
  /** Live messages received on the SUB socket, valid or not. */
  RECEIVED("received", null, null),
  /** Batches decoded and applied (live or replayed). */
  BATCHES("batches", null, null),
  /** Events applied, by type. */
  STORED_EVENTS("applied", "event", "stored"),
  REMOVED_EVENTS("applied", "event", "removed"),
  CLEARED_EVENTS("applied", "event", "cleared"),
  /** Blocks applied, by operation. */
  STORED_BLOCKS("blocks", "op", "stored"),
  REMOVED_BLOCKS("blocks", "op", "removed"),
  /** Batches lost: sequence numbers never received (after replay) and undecodable batches. */
  DROPPED_BATCHES("dropped", null, null),
  /** Sequence gaps detected. */
  GAPS("gaps", null, null),
  REPLAYS("replays", "result", "ok"),
  REPLAY_FAILURES("replays", "result", "failed"),
  /** Publisher restarts (sequence went backwards). */
  RESETS("resets", null, null),
  /**
   * Messages over the size limit ({@code events.max_message_bytes}): never read; ZMQ drops the connection and
   * reconnects, and what the message carried is lost as after a gap.
   */
  OVERSIZE("oversize", null, null),
  /** Messages with the wrong frame count or an undecodable payload. */
  MALFORMED("malformed", null, null),
  /** Stores whose parent block is unknown here (dropped). */
  UNKNOWN_PARENT("unknown_parent", null, null),
  /** Skipped for a reason the router cannot index, by reason. */
  SKIPPED_BLOCK_SIZE("skipped", "reason", "block_size"),
  SKIPPED_MEDIUM("skipped", "reason", "medium"),
  SKIPPED_GROUP("skipped", "reason", "group"),
  SKIPPED_GROUP_LIMIT("skipped", "reason", "group_limit"),
  SKIPPED_LOCALITY("skipped", "reason", "locality"),
  SKIPPED_UNKNOWN_TYPE("skipped", "reason", "unknown_type"),
  SKIPPED_TOKENS("skipped", "reason", "tokens"),
  SKIPPED_UNKNOWN_BLOCK("skipped", "reason", "unknown_block"),
  /** Removes of blocks this view does not hold (normal after an eviction or a partial history). */
  UNKNOWN_REMOVES("unknown_removes", null, null),
  /** Batches whose data_parallel_rank differs from the source's rank (applied anyway). */
  DP_RANK_MISMATCH("dp_rank_mismatch", null, null),
  /** Live messages whose handling failed unexpectedly (a bug): the view is marked stale, the shard goes on. */
  ERRORS("errors", null, null);

  private final String metric;
  private final String tagKey;
  private final String tagValue;

  EventCounter(String metric, String tagKey, String tagValue) {
    this.metric = metric;
    this.tagKey = tagKey;
    this.tagValue = tagValue;
  }

  /** Micrometer name ({@code kvrouter.events.<metric>}; Prometheus adds {@code _total}). */
  public String meterName() {
    return "kvrouter.events." + metric;
  }

  /** Extra tag key, or null. */
  public String tagKey() {
    return tagKey;
  }

  public String tagValue() {
    return tagValue;
  }
}
