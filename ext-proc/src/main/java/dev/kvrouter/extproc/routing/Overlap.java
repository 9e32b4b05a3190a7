package dev.kvrouter.extproc.routing;

/**
 * How much of a request's prompt one cache owner already holds, in full KV blocks counted from the first.
 *
 * <p>Tier fields are exclusive extensions of one prefix run: blocks {@code [0, gpu)} are on GPU, the next
 * {@code cpu} blocks on host memory, the next {@code disk} blocks on disk. Use {@link #fromLeadingRuns} when a
 * source reports each tier's leading run independently.
 *
 * @param gpu leading blocks held on GPU
 * @param cpu further blocks held on CPU after the GPU run
 * @param disk further blocks held on disk after the CPU run
 * @param predicted leading blocks recorded by the router's own recent decisions (predicted entries), which cover
 *     the gap before a worker's events arrive
 * @param stale true when this worker's event view is stale (a gap, a reconnect): its tier fields cannot be
 *     trusted and the policy scores it with predicted entries only
 */
public record Overlap(int gpu, int cpu, int disk, int predicted, boolean stale) {

  public static final Overlap NONE = new Overlap(0, 0, 0, 0, false);

  public Overlap {
    if (gpu < 0 || cpu < 0 || disk < 0 || predicted < 0) {
      throw new IllegalArgumentException("negative overlap");
    }
  }

  /**
   * From independent leading runs per tier (each counted from block 0): a block counts in the fastest tier that
   * holds it, and the run continues while any tier holds the next block.
   */
  public static Overlap fromLeadingRuns(int gpuRun, int cpuRun, int diskRun, int predicted, boolean stale) {
    int g = Math.max(0, gpuRun);
    int gc = Math.max(g, cpuRun);
    int gcd = Math.max(gc, diskRun);
    return new Overlap(g, gc - g, gcd - gc, Math.max(0, predicted), stale);
  }

  /** Blocks held in any tier according to events. */
  public int cached() {
    return gpu + cpu + disk;
  }

  /**
   * The overlap the router believes in: predicted entries only when stale, otherwise the longer of the event
   * view and the predicted entries.
   */
  public int effective() {
    return stale ? predicted : Math.max(cached(), predicted);
  }
}
