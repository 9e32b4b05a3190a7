package dev.kvrouter.extproc.routing;

import java.util.Arrays;

/**
 * How much of what a model's fleet is asked for it had already computed once and since evicted everywhere, and how
 * hot the prefix a request would reuse is. The first is the share of recent prompt blocks that no worker holds
 * (beyond the longest prefix any worker's events show or any in-flight request there carries) although an earlier
 * request carried them: the router's view of the capacity misses that {@code VirtualAb --miss-breakdown} counts as
 * "evicted". The second is {@link PrefixHeat}'s.
 *
 * <p>Why the cost model wants them: recomputing a prefix on a worker that does not hold it, instead of queueing behind
 * the one that does, writes a second copy, and a full cache pays for that copy by evicting something. When nothing the
 * fleet evicts comes back (a document set the fleet holds, a system prompt every worker keeps) the copy is free and
 * spreading hot prefixes is right; when the fleet keeps recomputing what it once had (a trace whose working set exceeds
 * its memory) every copy costs later hits, and the recompute charge should rise. Measured on the A/B's workloads the
 * share separates them cleanly: 0 for RAG over 256 documents and for best-of-N, under 0.01 for the small and llm-d
 * system-prompt specs and multi-turn, 0.05 for image QA, 0.31 for Mooncake (the breakdown's truth; the router reads
 * 0.22 there). A prefix taking more than one worker's share of the requests is the exception: its holder cannot serve
 * it alone, so copies of it are needed however short the memory, and the charge falls to 1 for it ({@link
 * Reading#chargedShare}; RAG over 4,096 documents, one of them hot: request imbalance 1.70 with the full charge, 1.52
 * with the hot one exempt, 1.50 without the term).
 *
 * <p>"Carried earlier" is a direct-mapped table of 32-bit fingerprints of block hashes the router has routed. Only
 * one block in {@link #SAMPLE} is tracked, chosen by its hash (spatial sampling, as SHARDS estimates miss ratios): a
 * block is always sampled or never, so the share stays unbiased, the table covers {@code SAMPLE} times more distinct
 * blocks than it has slots, and a 2,000-block prompt touches about 250 slots, not 2,000. A newer block overwrites an
 * older one in its slot, so the table remembers roughly the last {@code SAMPLE x slots} distinct blocks. Slots take
 * the hash's low bits, fingerprints bits 29-60 and the sample its top three, so a false "seen" needs a 32-bit
 * collision. The share is a block-weighted moving average over about {@code 1 / (1 - DECAY)} requests.
 *
 * <p>Not thread-safe: the {@link Router} reads and updates it only inside a decision, under its decision lock.
 */
public final class EvictionPressure {

  /** Per request, the weight earlier requests keep: about the last thousand requests count. */
  static final double DECAY = 1.0 - 1.0 / 1024;

  /** One block in this many is tracked (hashes whose top three bits are zero). */
  public static final int SAMPLE = 8;

  /** Slot bits stay below the fingerprint's. */
  public static final int MAX_SLOTS = 1 << 28;

  private final int[] seen;
  private final int mask;
  private double evicted;
  private double blocks;

  /**
   * @param slots fingerprints remembered, rounded up to a power of two (4 bytes each); {@code SAMPLE x slots}
   *     should be a few times the fleet's KV blocks, so a block is still remembered when the fleet has evicted it
   */
  public EvictionPressure(int slots) {
    checkSlots(slots);
    int n = Integer.highestOneBit(slots);
    n = n < slots ? n << 1 : n;
    this.seen = new int[n];
    this.mask = n - 1;
  }

  /** @throws IllegalArgumentException unless {@code slots} is in [1, {@link #MAX_SLOTS}] */
  static void checkSlots(int slots) {
    if (slots < 1 || slots > MAX_SLOTS) {
      throw new IllegalArgumentException("slots must be in [1, 2^28], was " + slots);
    }
  }

  /**
   * The fleet's pressure as one request finds it.
   *
   * @param evictionShare the model's eviction share before this request
   * @param prefixHeat the recent share of requests whose held prefix ends in the same block as this one's
   *     ({@link PrefixHeat}), 0 when no worker holds any of it
   */
  public record Reading(double evictionShare, double prefixHeat) {

    /**
     * The share the recompute charge follows: the eviction share, scaled down for a prefix hot enough that its
     * holder cannot serve it alone ({@code prefixHeat} of {@code owners} cache owners: none left past one owner's
     * share of the requests).
     */
    public double chargedShare(int owners) {
      return evictionShare * (1 - ownerShare(owners));
    }

    /**
     * How far past one of {@code owners} cache owners' share of the requests the prefix is, in owners' shares,
     * capped at 1: 0 for a prefix one holder can serve alone, 1 from two owners' share. Where
     * {@link #chargedShare} stops exempting (one owner's share), this starts relieving the base recompute charge
     * ({@link Weights#hotPrefixRelief}).
     */
    public double hotExcess(int owners) {
      return Math.max(0, Math.min(1, prefixHeat * owners - 1));
    }

    /**
     * The prefix's share of the requests in {@code owners} cache owners' shares, capped at 1: 0 for a prefix only
     * this request's session reuses, 1 for one that takes a whole holder's share. What a copy of it elsewhere can
     * take off its holders ({@link Weights#newPrefillIdleRelief}).
     */
    public double ownerShare(int owners) {
      return Math.max(0, Math.min(1, prefixHeat * owners));
    }
  }

  private final PrefixHeat heat = new PrefixHeat();

  /**
   * Reads the pressure, then records this request: {@code hashes[fleetHeld..]} are the blocks no worker holds;
   * the ones seen before count as evicted. Every hash is remembered, the held ones too, so a block a worker
   * holds now is known when it comes back after its eviction.
   */
  public Reading observe(long[] hashes, int fleetHeld) {
    double hot = 0;
    if (fleetHeld > 0 && fleetHeld <= hashes.length) {
      hot = heat.observe(hashes[fleetHeld - 1]);
    } else {
      heat.skip();
    }
    return new Reading(count(hashes, fleetHeld), hot);
  }

  private double count(long[] hashes, int fleetHeld) {
    int from = Math.max(0, Math.min(fleetHeld, hashes.length));
    int back = 0;
    int sampled = 0;
    for (int i = 0; i < hashes.length; i++) {
      long h = hashes[i];
      if ((h >>> 61) != 0) {
        continue;
      }
      sampled++;
      int slot = (int) h & mask;
      int print = fingerprint(h);
      if (i >= from && seen[slot] == print) {
        back++;
      }
      seen[slot] = print;
    }
    double before = share();
    evicted = evicted * DECAY + back;
    blocks = blocks * DECAY + sampled;
    return before;
  }

  /**
   * Forgets every block seen so far, keeping the share measured until now (it decays as requests come): after a
   * worker's cache was emptied, blocks it held come back without the fleet having evicted them.
   */
  public void forgetSeen() {
    Arrays.fill(seen, 0);
  }

  /** The recent share of prompt blocks that came back after the fleet evicted them, 0 before any request. */
  public double share() {
    return blocks > 0 ? evicted / blocks : 0;
  }

  /** Memory held by the table (the router logs it when it creates one). */
  public long bytes() {
    return 4L * seen.length;
  }

  private static int fingerprint(long h) {
    int f = (int) (h >>> 29);
    return f == 0 ? 1 : f; // 0 marks an empty slot
  }
}
