package dev.kvrouter.extproc.load;

import dev.kvrouter.index.WorkerId;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One request's claim on a worker, held from the routing decision until the response ends (or the claim
 * expires). Two parts are released separately: the prefill tokens when the first response byte arrives, the
 * KV blocks when the stream ends, is cancelled or is reset.
 *
 * <p>Each part is released at most once whatever thread gets there first (response, cancel, sweeper): the
 * {@link #state} moves only forward, by compare-and-set.
 */
public final class Reservation {

  static final int RESERVED = 0;
  static final int PREFILL_DONE = 1;
  static final int RELEASED = 2;

  /** Stands for "nothing was reserved" (no ledger, or the ledger was full); releasing it does nothing. */
  public static final Reservation NONE = new Reservation(0, null, null, 0, new long[0], 0, 0, false, 0, 0, 0);

  final long id;
  final WorkerId worker;
  final LoadLedger.WorkerLedger ledger;
  final long prefillTokens;
  final long[] blockHashes;
  final int uniqueBlocks;
  final long createdNanos;
  /** Another router replica's request, copied from its {@code ReplicaSync} messages. */
  final boolean remote;
  /** Its place among every replica's decisions ({@link LoadLedger#lastTurn}). */
  final long turn;
  /** The whole prompt's tokens and its blocks' size, for other replicas (0: not given). */
  final long promptTokens;
  final int blockSize;
  /** Blocks this reservation added to the worker's distinct active blocks when it was made. */
  long addedBlocks;
  final AtomicInteger state = new AtomicInteger(RESERVED);

  Reservation(long id, WorkerId worker, LoadLedger.WorkerLedger ledger, long prefillTokens, long[] blockHashes,
      int uniqueBlocks, long createdNanos, boolean remote, long turn, long promptTokens, int blockSize) {
    this.id = id;
    this.worker = worker;
    this.ledger = ledger;
    this.prefillTokens = prefillTokens;
    this.blockHashes = blockHashes;
    this.uniqueBlocks = uniqueBlocks;
    this.createdNanos = createdNanos;
    this.remote = remote;
    this.turn = turn;
    this.promptTokens = promptTokens;
    this.blockSize = blockSize;
  }

  /** The ledger's number for this reservation, unique within this process. */
  public long id() {
    return id;
  }

  /** Its turn: the ledger's Lamport clock when it was made (0 for {@link #NONE}). */
  public long turn() {
    return turn;
  }

  /** The whole prompt's tokens, cached or not (0: not given). */
  public long promptTokens() {
    return promptTokens;
  }

  /** Tokens per block of {@link #blockHashes()} (0: not given). */
  public int blockSize() {
    return blockSize;
  }

  /** The prompt's full-block hashes it holds, in chain order; not to be modified. */
  public long[] blockHashes() {
    return blockHashes;
  }

  /** Blocks only this request occupies (partial last prompt block and expected output). */
  public int uniqueBlocks() {
    return uniqueBlocks;
  }

  public WorkerId worker() {
    return worker;
  }

  /** Prefill tokens charged to the worker until the first response byte. */
  public long prefillTokens() {
    return prefillTokens;
  }

  /**
   * Blocks the request occupies: its full prompt blocks (shared ones counted once per worker in the ledger's
   * distinct blocks) plus the rest; also the context blocks it adds to its worker's decode reads.
   */
  public int blocks() {
    return blockHashes.length + uniqueBlocks;
  }

  /** Distinct blocks this request added to the worker's active set (its blocks minus the ones already active). */
  public long addedBlocks() {
    return addedBlocks;
  }

  public boolean released() {
    return state.get() == RELEASED;
  }

  public boolean prefillReleased() {
    return state.get() != RESERVED;
  }

  @Override
  public String toString() {
    return "Reservation{" + id + " " + worker + " prefill=" + prefillTokens + " blocks=" + blocks() + " state="
        + state.get() + "}";
  }
}
