package dev.kvrouter.examples.sim.engine;

/**
 * A doubly linked list of slot numbers {@code 0..capacity-1} kept in two int arrays, for eviction orders that
 * move slots in O(1) without allocating: vLLM's free-block queue ({@link KvBlockPool}) and the CPU tier's LRU
 * order ({@link CpuOffloadManager}). A slot is in the list at most once; callers track membership.
 *
 * <p>Single-threaded: owned by the engine thread, like its users.
 */
final class SlotList {

  static final int NONE = -1;

  private final int[] prev;
  private final int[] next;
  private int head = NONE;
  private int tail = NONE;

  SlotList(int capacity) {
    prev = new int[capacity];
    next = new int[capacity];
  }

  /** The first slot (next to evict), or {@link #NONE}. */
  int head() {
    return head;
  }

  /** The last slot (most recently appended), or {@link #NONE}. */
  int tail() {
    return tail;
  }

  /** The slot after {@code s}, or {@link #NONE}. */
  int next(int s) {
    return next[s];
  }

  /** The slot before {@code s}, or {@link #NONE}. */
  int prev(int s) {
    return prev[s];
  }

  /** Adds {@code s}, which must not be in the list, at the tail. */
  void append(int s) {
    prev[s] = tail;
    next[s] = NONE;
    if (tail == NONE) {
      head = s;
    } else {
      next[tail] = s;
    }
    tail = s;
  }

  /** Takes {@code s}, which must be in the list, out of it. */
  void unlink(int s) {
    int p = prev[s];
    int n = next[s];
    if (p == NONE) {
      head = n;
    } else {
      next[p] = n;
    }
    if (n == NONE) {
      tail = p;
    } else {
      prev[n] = p;
    }
    prev[s] = NONE;
    next[s] = NONE;
  }

  /** Empties the list. */
  void clear() {
    head = NONE;
    tail = NONE;
  }
}
