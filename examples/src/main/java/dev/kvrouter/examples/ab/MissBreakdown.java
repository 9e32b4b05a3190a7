package dev.kvrouter.examples.ab;

import dev.kvrouter.examples.workload.IdealReuse;
import dev.kvrouter.examples.workload.LongHashSet;
import dev.kvrouter.examples.workload.PromptIds;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.LongConsumer;

/**
 * Where a policy's computed prompt blocks could have come from: for every cacheable prompt block the chosen worker
 * computed (missed), what the fleet held at the decision, measured on the engines' own caches (the truth), beside
 * what the router's index believed and what the two ideals (infinite, and the fleet's capacity as one LRU cache)
 * held. It answers "why is the policy at N% of the fleet bound": blocks on another worker that the router knew of
 * (it chose load over cache), or did not (lost knowledge), blocks nobody held any more (evicted fleet-wide, split
 * by whether one shared LRU of the fleet's size would still hold them), and cold blocks.
 *
 * <p>A request's missed blocks are {@code [hit, cacheable)}, {@code hit} being the engine's cached blocks at
 * admission and {@code cacheable} = {@code (prompt tokens - 1) / block size} (vLLM computes the last token). Each
 * is put in the first class that applies, at the decision:
 *
 * <ol>
 *   <li>{@code lost_while_queued}: the chosen worker held it, and evicted it before admitting the request;
 *   <li>{@code elsewhere_known} / {@code elsewhere_unknown}: another worker held it with its whole prefix (a
 *       leading run of the prompt), and the router's overlap for such a worker covered it / did not;
 *   <li>{@code evicted}: no worker held it, an earlier request had been admitted with it (it was computed);
 *   <li>{@code pending}: no worker held it, only requests not yet admitted carried it;
 *   <li>{@code cold}: no earlier request carried it (the infinite ideal misses it too).
 * </ol>
 *
 * <p>Each class is split by whether the fleet-LRU ideal, replayed alongside in decision order (the ideal's order
 * for an open-loop workload), held the block: the sum of the "in fleet LRU" parts, less the hits the fleet LRU
 * would not have had, is the gap to that bound. Duplication: sampled, the fleet's cached blocks against its
 * distinct cached identities. The router's prediction on the chosen worker against the truth at the decision:
 * blocks it believed the worker held that it did not ({@code routerOver}), and the reverse.
 *
 * <p>Single-threaded (the run's thread); costs one lookup per prompt block per worker at each decision and a scan of
 * every cache per sample. Memory grows with the workload's distinct blocks (three sets of them, like the infinite
 * ideal's), and each routed request's identities are kept until its admission: a measurement for a finite replay,
 * off by default.
 */
final class MissBreakdown {

  /** The classes of a missed block, in precedence order. */
  enum Miss {
    LOST_WHILE_QUEUED, ELSEWHERE_KNOWN, ELSEWHERE_UNKNOWN, EVICTED, PENDING, COLD;

    String key() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /** The engines' caches, as the breakdown reads them. */
  interface Fleet {
    int workers();

    /** Leading blocks of {@code ids[0..n)} worker {@code w} holds now. */
    int cachedLead(int w, long[] ids, int n);

    /** Every cached block identity of worker {@code w} (duplicates within it included). */
    void forEachCached(int w, LongConsumer sink);

    /** KV blocks per worker. */
    long capacityBlocks();
  }

  /**
   * One routed request between its decision and its admission: its block identities (cacheable part), the truth
   * and the router's view per worker, and the leading blocks each ideal and the computed set held.
   */
  record Pending(long[] ids, int cacheable, int chosen, int[] truthLead, int[] routerLead, int predicted,
      int seenLead, int fleetLead, int computedLead) {}

  private final int blockSize;
  private final long fleetCapacity;
  private final IdealReuse.Replay infinite;
  private final IdealReuse.Replay fleetLru;
  /** Blocks of requests that were admitted: computed (or hit) somewhere at some point. */
  private final LongHashSet computed = new LongHashSet(1 << 16);
  /** Missed blocks by class and by whether the fleet-LRU ideal held them (index 1). */
  private final long[][] missed = new long[Miss.values().length][2];
  private long requests;
  private long promptTokens;
  private long cacheableBlocks;
  private long hits;
  private long hitsBeyondFleetLru;
  private long routerOver;
  private long routerUnder;
  private long gainedWhileQueued;
  private long samples;
  private double cachedSum;
  private double distinctSum;

  /**
   * @param root the engines' chain root (their namespace), so identities compare with their caches
   * @param fleetCapacityBlocks the fleet's KV blocks, the size of the shared-LRU ideal
   */
  MissBreakdown(long root, int blockSize, long fleetCapacityBlocks) {
    this.blockSize = blockSize;
    this.fleetCapacity = fleetCapacityBlocks;
    this.infinite = new IdealReuse.Replay(root, blockSize, Long.MAX_VALUE);
    this.fleetLru = new IdealReuse.Replay(root, blockSize, fleetCapacityBlocks);
  }

  /**
   * A request at its decision. Every request is offered, in decision order, so the ideals replay the whole
   * workload; one the engine refuses is passed with {@code chosen} -1 and is not classified.
   *
   * @param ids the prompt as the engine prefills it (tokens, media with the engine's identifiers)
   * @param answer the scripted answer the engine will generate and cache, or null
   * @param chosen the chosen worker's index, -1 for a request that will not run
   * @param routerLead per worker, the router's effective overlap (blocks) at this decision
   * @param predicted the router's predicted cached blocks on the chosen worker
   * @return the request's state, to pass to {@link #admitted}; null when {@code chosen} is -1
   */
  Pending decided(PromptIds ids, int[] answer, int chosen, int[] routerLead, int predicted, Fleet fleet) {
    int n = ids.tokens().length;
    int cacheable = n == 0 ? 0 : (n - 1) / blockSize;
    int fleetLead = fleetLru.offer(ids, answer);
    int seenLead = infinite.offer(ids, answer);
    if (chosen < 0) {
      return null;
    }
    long[] h = Arrays.copyOf(infinite.hashes(), cacheable);
    int computedLead = 0;
    while (computedLead < cacheable && computed.contains(h[computedLead])) {
      computedLead++;
    }
    int[] truth = new int[fleet.workers()];
    for (int w = 0; w < truth.length; w++) {
      truth[w] = fleet.cachedLead(w, h, cacheable);
    }
    requests++;
    promptTokens += n;
    cacheableBlocks += cacheable;
    return new Pending(h, cacheable, chosen, truth, routerLead.clone(), Math.min(predicted, cacheable),
        Math.min(seenLead, cacheable), Math.min(fleetLead, cacheable), computedLead);
  }

  /** The request was admitted (its first token) having hit {@code hitBlocks} cached blocks: classify its misses. */
  void admitted(Pending p, int hitBlocks) {
    int hit = Math.min(hitBlocks, p.cacheable());
    hits += hit;
    hitsBeyondFleetLru += Math.max(0, hit - p.fleetLead());
    int truthChosen = Math.min(p.truthLead()[p.chosen()], p.cacheable());
    routerOver += Math.max(0, p.predicted() - truthChosen);
    routerUnder += Math.max(0, truthChosen - p.predicted());
    gainedWhileQueued += Math.max(0, hit - truthChosen);
    for (int i = hit; i < p.cacheable(); i++) {
      missed[classify(p, i).ordinal()][i < p.fleetLead() ? 1 : 0]++;
    }
    for (long id : p.ids()) {
      computed.add(id);
    }
  }

  static Miss classify(Pending p, int block) {
    if (block < p.truthLead()[p.chosen()]) {
      return Miss.LOST_WHILE_QUEUED;
    }
    boolean elsewhere = false;
    for (int w = 0; w < p.truthLead().length; w++) {
      if (w != p.chosen() && p.truthLead()[w] > block) {
        if (p.routerLead()[w] > block) {
          return Miss.ELSEWHERE_KNOWN;
        }
        elsewhere = true;
      }
    }
    if (elsewhere) {
      return Miss.ELSEWHERE_UNKNOWN;
    }
    if (block < p.computedLead()) {
      return Miss.EVICTED;
    }
    return block < p.seenLead() ? Miss.PENDING : Miss.COLD;
  }

  /** Samples duplication: the fleet's cached blocks against its distinct identities. */
  void sample(Fleet fleet) {
    LongHashSet distinct = new LongHashSet((int) Math.min(1 << 22, fleet.capacityBlocks() * fleet.workers()));
    long[] total = new long[1];
    for (int w = 0; w < fleet.workers(); w++) {
      fleet.forEachCached(w, id -> {
        total[0]++;
        distinct.add(id);
      });
    }
    // only a full fleet says anything about wasted capacity
    if (total[0] >= 0.9 * fleet.capacityBlocks() * fleet.workers()) {
      samples++;
      cachedSum += total[0];
      distinctSum += distinct.size();
    }
  }

  long missed(Miss m, boolean inFleetLru) {
    return missed[m.ordinal()][inFleetLru ? 1 : 0];
  }

  long hits() {
    return hits;
  }

  long hitsBeyondFleetLru() {
    return hitsBeyondFleetLru;
  }

  long routerOver() {
    return routerOver;
  }

  long routerUnder() {
    return routerUnder;
  }

  long gainedWhileQueued() {
    return gainedWhileQueued;
  }

  /** The breakdown for virtual.json: blocks, and shares of prompt tokens (block x block size / prompt tokens). */
  Map<String, Object> toJson() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("requests", requests);
    m.put("promptTokens", promptTokens);
    m.put("cacheableBlocks", cacheableBlocks);
    m.put("hitBlocks", hits);
    m.put("hitBlocksBeyondFleetLru", hitsBeyondFleetLru);
    m.put("servedShare", share(hits));
    Map<String, Object> classes = new LinkedHashMap<>();
    long missedInFleet = 0;
    for (Miss c : Miss.values()) {
      long in = missed(c, true);
      long out = missed(c, false);
      missedInFleet += in;
      classes.put(c.key(), Map.of("blocks", in + out, "share", share(in + out), "inFleetLruBlocks", in,
          "inFleetLruShare", share(in)));
    }
    m.put("missed", classes);
    m.put("missedInFleetLruShare", share(missedInFleet));
    m.put("gapToFleetLruShare", share(missedInFleet - hitsBeyondFleetLru));
    m.put("uncacheableShare", promptTokens == 0 ? 0 : round(1.0 - (double) cacheableBlocks * blockSize / promptTokens));
    m.put("routerOverBlocks", routerOver);
    m.put("routerUnderBlocks", routerUnder);
    m.put("gainedWhileQueuedBlocks", gainedWhileQueued);
    m.put("fleetCapacityBlocks", fleetCapacity);
    m.put("fullFleetSamples", samples);
    m.put("meanCachedBlocks", samples == 0 ? 0 : Math.round(cachedSum / samples));
    m.put("meanDistinctBlocks", samples == 0 ? 0 : Math.round(distinctSum / samples));
    m.put("duplicateShare", samples == 0 ? 0 : round(1 - distinctSum / cachedSum));
    return m;
  }

  /** One line for the run's progress output. */
  String summary() {
    StringBuilder b = new StringBuilder(String.format(java.util.Locale.ROOT,
        "served %.1f%% (%.1f%% beyond fleet LRU); computed:", share(hits) * 100, share(hitsBeyondFleetLru) * 100));
    long missedInFleet = 0;
    for (Miss c : Miss.values()) {
      long in = missed(c, true);
      missedInFleet += in;
      b.append(String.format(java.util.Locale.ROOT, " %s %.1f%% (fleet LRU %.1f%%)", c.key(),
          share(in + missed(c, false)) * 100, share(in) * 100));
    }
    b.append(String.format(java.util.Locale.ROOT, "; gap to fleet LRU %.1f%%; router over %d under %d blocks, "
            + "gained while queued %d; duplicates %.1f%% of cached (%d samples)",
        share(missedInFleet - hitsBeyondFleetLru) * 100, routerOver, routerUnder, gainedWhileQueued,
        samples == 0 ? 0 : (1 - distinctSum / cachedSum) * 100, samples));
    return b.toString();
  }

  private double share(long blocks) {
    return promptTokens == 0 ? 0 : round((double) blocks * blockSize / promptTokens);
  }

  private static double round(double v) {
    return Math.round(v * 10000) / 10000.0;
  }
}
