package dev.kvrouter.extproc.pipeline;

/**
 * A request thread's reusable working arrays for {@link PromptPipeline}: the token ids of the prompt being
 * hashed and the block hashes found so far. A 32k-token prompt would otherwise allocate about 150 kB of ids
 * and 30 kB of hashes per request, which is what pushes the request path into GC pauses at its tail.
 *
 * <p>Ownership: {@link #take()} removes the thread's buffers from its slot, so exactly one pipeline run owns
 * them (a nested or concurrent use on the same thread gets fresh ones); {@link #giveBack()} returns them to
 * the slot of the thread that gives them back. A run whose token cursor outlives it (an early-stopped prompt
 * finished on the background executor) hands the token array to that cursor: it sets {@link #tokens} to null
 * before giving the rest back, and the array becomes garbage with the cursor. Nothing here is thread-safe;
 * nothing is shared between threads.
 *
 * <p>Bounded: arrays larger than {@link #MAX_KEPT_TOKENS} / {@link #MAX_KEPT_BLOCKS} are dropped instead of
 * kept, so a thread holds at most about 1.1 MB here however long the prompts it served.
 */
final class RequestBuffers {
  /** Largest token array a thread keeps (1 MB): prompts beyond 128k tokens allocate their own. */
  static final int MAX_KEPT_TOKENS = 1 << 18;
  /** Largest hash array a thread keeps (128 kB). */
  static final int MAX_KEPT_BLOCKS = 1 << 14;

  private static final ThreadLocal<RequestBuffers[]> SLOT = ThreadLocal.withInitial(() -> new RequestBuffers[1]);

  /** Token ids scratch for a cursor, or null (the tokenizer allocates one). */
  int[] tokens;
  /** Block hashes scratch; never null. */
  long[] hashes = new long[64];

  private RequestBuffers() {}

  /** The calling thread's buffers, now owned by the caller until {@link #giveBack()}. */
  static RequestBuffers take() {
    RequestBuffers[] slot = SLOT.get();
    RequestBuffers b = slot[0];
    if (b == null) {
      return new RequestBuffers();
    }
    slot[0] = null;
    return b;
  }

  /** Returns these buffers to the calling thread for its next request; the caller must not use them after. */
  void giveBack() {
    if (tokens != null && tokens.length > MAX_KEPT_TOKENS) {
      tokens = null;
    }
    if (hashes.length > MAX_KEPT_BLOCKS) {
      hashes = new long[64];
    }
    SLOT.get()[0] = this;
  }
}
