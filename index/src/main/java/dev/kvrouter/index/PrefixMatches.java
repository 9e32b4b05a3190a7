package dev.kvrouter.index;

import java.util.Arrays;

/**
 * The answer to a prefix lookup: for each worker holding at least the first block (from events or as a
 * prediction), how many leading blocks it holds and where.
 *
 * <p>{@link #matchedBlocks} counts leading blocks held in any real tier; it splits into {@link #gpuBlocks},
 * {@link #cpuBlocks} and {@link #diskBlocks} by the best tier of each block (GPU over CPU over disk).
 * {@link #predictedBlocks} counts leading blocks covered by the router's own recent decisions. The two are
 * kept apart so decisions can report both; {@link #overlapBlocks} merges them by taking the larger, as
 * Dynamo does. {@link #stale} says the worker's event view may be wrong.
 *
 * <p>Reusable and not thread-safe: a request thread keeps one and passes it to every lookup, so lookups do
 * not allocate once the arrays have grown to the fleet size.
 */
public final class PrefixMatches {

  private int size;
  private int blocks;
  /**
   * The index's ids by ordinal when the answer was made (a copy-on-write array, never mutated): workers are named
   * through it and {@link #ordinals} rather than stored one by one, because a reference store into this long-lived
   * array costs a GC write barrier with a StoreLoad fence each (G1), half of a 64-worker lookup's time.
   */
  private WorkerId[] ids = new WorkerId[0];
  private int[] ordinals = new int[8];
  private int[] matched = new int[8];
  private int[] gpu = new int[8];
  private int[] cpu = new int[8];
  private int[] disk = new int[8];
  private int[] predicted = new int[8];
  private boolean[] stale = new boolean[8];

  /** Number of workers in the answer. */
  public int size() {
    return size;
  }

  /** Number of request blocks the lookup examined. */
  public int blocks() {
    return blocks;
  }

  public WorkerId worker(int i) {
    check(i);
    return ids[ordinals[i]];
  }

  /** The worker's ordinal in the index (stable while it is registered). */
  public int ordinal(int i) {
    check(i);
    return ordinals[i];
  }

  /** Leading blocks held in any tier, from events. */
  public int matchedBlocks(int i) {
    check(i);
    return matched[i];
  }

  public int gpuBlocks(int i) {
    check(i);
    return gpu[i];
  }

  public int cpuBlocks(int i) {
    check(i);
    return cpu[i];
  }

  public int diskBlocks(int i) {
    check(i);
    return disk[i];
  }

  /** Leading blocks covered by predicted entries. */
  public int predictedBlocks(int i) {
    check(i);
    return predicted[i];
  }

  /** {@code max(matchedBlocks, predictedBlocks)}. */
  public int overlapBlocks(int i) {
    check(i);
    return Math.max(matched[i], predicted[i]);
  }

  public boolean stale(int i) {
    check(i);
    return stale[i];
  }

  /** Position of {@code worker} in this answer, or -1 if it holds no leading block. */
  public int indexOf(WorkerId worker) {
    for (int i = 0; i < size; i++) {
      if (ids[ordinals[i]].equals(worker)) {
        return i;
      }
    }
    return -1;
  }

  /** The largest {@link #overlapBlocks} over all workers (0 if none). */
  public int longest() {
    int m = 0;
    for (int i = 0; i < size; i++) {
      m = Math.max(m, Math.max(matched[i], predicted[i]));
    }
    return m;
  }

  void reset(int examined) {
    size = 0;
    blocks = examined;
  }

  /** Names the ordinals of the answer being built: the index's ids-by-ordinal array, which is never mutated. */
  void names(WorkerId[] idsByOrdinal) {
    ids = idsByOrdinal;
  }

  /** Makes room for {@code n} workers, so the adds of one answer never grow the arrays. */
  void ensureCapacity(int n) {
    if (n > ordinals.length) {
      grow(Math.max(n, ordinals.length * 2));
    }
  }

  private void grow(int n) {
    ordinals = Arrays.copyOf(ordinals, n);
    matched = Arrays.copyOf(matched, n);
    gpu = Arrays.copyOf(gpu, n);
    cpu = Arrays.copyOf(cpu, n);
    disk = Arrays.copyOf(disk, n);
    predicted = Arrays.copyOf(predicted, n);
    stale = Arrays.copyOf(stale, n);
  }

  /** Adds ordinal {@code ord}, which must be named (non-null) in the array given to {@link #names}. */
  void add(int ord, int m, int g, int c, int d, int p, boolean s) {
    if (size == ordinals.length) {
      grow(size * 2);
    }
    ordinals[size] = ord;
    matched[size] = m;
    gpu[size] = g;
    cpu[size] = c;
    disk[size] = d;
    predicted[size] = p;
    stale[size] = s;
    size++;
  }

  private void check(int i) {
    if (i < 0 || i >= size) {
      throw new IndexOutOfBoundsException("index " + i + ", size " + size);
    }
  }

  @Override
  public String toString() {
    StringBuilder b = new StringBuilder("PrefixMatches[blocks=").append(blocks);
    for (int i = 0; i < size; i++) {
      b.append(", ").append(ids[ordinals[i]]).append("={matched=").append(matched[i]).append(" gpu=").append(gpu[i])
          .append(" cpu=").append(cpu[i]).append(" disk=").append(disk[i]).append(" predicted=")
          .append(predicted[i]).append(stale[i] ? " stale" : "").append('}');
    }
    return b.append(']').toString();
  }
}
