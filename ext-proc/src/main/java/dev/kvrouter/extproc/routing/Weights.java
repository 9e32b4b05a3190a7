package dev.kvrouter.extproc.routing;

import java.util.List;
import java.util.Locale;

/**
 * The knobs of the cost model and the optional imbalance gate. Defaults are Dynamo's published defaults
 * (anchors §1.1) but for {@code new_prefill_weight}, {@code decode_load_scale} and {@code decode_read_weight}, plus
 * the terms that are ours ({@code new_prefill_eviction_weight}, {@code hot_prefix_relief}), and SGLang's gate
 * thresholds (§2.1, §2.5). Configurable globally and per model
 * ({@code routing.weights}, {@code routing.models.<m>.weights}) and per request through the trusted
 * {@code x-kvrouter-weights} header, all with the same snake_case keys ({@link #KEYS}).
 *
 * @param gpuCredit credit per GPU-cached block ({@code overlap_score_credit}; 1 = the block costs nothing)
 * @param cpuCredit credit per block found on CPU after the GPU run ({@code host_cache_hit_weight})
 * @param diskCredit credit per block found on disk after that ({@code disk_cache_hit_weight})
 * @param predictedCredit credit per block of the router's own predicted entries
 * @param overlapCreditDecay shrinks the GPU credit of a worker with more queued prefill than the least queued
 *     ({@code overlap_score_credit_decay}; 0 = off)
 * @param prefillLoadScale weight of the prefill term ({@code prefill_load_scale})
 * @param decodeLoadScale weight of the decode term (Dynamo fixes it at 1)
 * @param activeRequestWeight cost per in-flight request ({@code decode_active_request_weight})
 * @param newPrefillWeight extra cost per prefill block the request itself adds to the worker (prompt blocks minus
 *     credit), beyond the wait it causes the request: the fleet compute it consumes, which later requests queue
 *     behind (0 = Dynamo's cost, which counts a new block only as this request's wait)
 * @param decodeReadWeight cost per context block the worker's decode steps read with the request: the context of
 *     every in-flight request there, summed per request (a shared prefix once per request holding it, as paged
 *     attention reads it), plus the request's own (0 = off; the decode term counts shared prefixes once)
 * @param temperature 0 = argmin; above 0 = softmax sampling over normalised costs ({@code router_temperature})
 * @param imbalanceGate when true, a fleet whose in-flight counts spread by more than both thresholds routes to
 *     the least-loaded worker regardless of cache (SGLang's gate)
 * @param imbalanceAbs absolute spread: {@code max - min > abs}
 * @param imbalanceRel relative spread: {@code max > rel x min}
 * @param newPrefillQueueWeight added to {@code new_prefill_weight} in proportion to the fleet's queued prefill: the
 *     mean queued prefill per candidate over this request's prompt blocks, capped at 1 (0 = off). Recomputing a
 *     block a holder has is cheap on an idle fleet and expensive on a busy one
 * @param boundedLoad consistent hashing with bounded loads (Mirrokni et al.): a worker already running
 *     {@code ceil(c x (fleet in-flight + 1) x its weight share)} requests or more is skipped, so no worker runs more
 *     than about {@code c} times its share however hot the prefix it holds (0 = off; otherwise at least 1)
 * @param newPrefillEvictionWeight added to {@code new_prefill_weight} in proportion to the fleet's eviction
 *     pressure ({@link EvictionPressure}: the recent share of prompt blocks the fleet had computed and evicted),
 *     reaching its full value at {@code eviction_share_full}. A second copy of a prefix is free while the fleet
 *     evicts nothing that comes back, and costs later hits once it does (0 = off)
 * @param evictionShareFull the eviction share at which {@code new_prefill_eviction_weight} applies in full (> 0)
 * @param hotPrefixRelief the part of {@code new_prefill_weight} forgiven for a prefix hotter than one worker can
 *     serve, in proportion to how far its {@link PrefixHeat} share of requests is past one worker's share (none at
 *     one worker's share, all of this from two workers'). Its copies are not wasted compute: one holder cannot
 *     serve it alone, so a copy made when the holder's queue outweighs the prefix serves later requests of it.
 *     In [0, 1]; 0 = off
 * @param stepTokens the engine's token budget per step (vLLM's {@code --max-num-batched-tokens}; its default is
 *     8192 on H100-class GPUs, 2048 on A100 and smaller ones). When set, the read term counts once per step the
 *     request waits for its first token ({@code max(1, prefill tokens ahead and its own / step_tokens)}): a
 *     worker with a long prefill queued reads its running sequences through every one of those steps. 0 = off
 *     (one step, the default): it buys the TTFT tail of workloads whose holders queue cold prompts longer than a
 *     step with some TPOT and cache (docs/routing.md)
 * @param newPrefillIdleRelief the part of {@code new_prefill_weight} (after {@code hot_prefix_relief}) lifted off a
 *     candidate in proportion to the square of its idle share, {@code max(0, 1 - its in-flight requests / its
 *     weight's share of the candidates')}, and to the held prefix's share of the requests in one cache owner's
 *     shares (capped at 1; 0 for a prefix no other request reuses): a copy of a prefix other requests reuse, made
 *     on a worker the fleet leaves idle, takes compute no one waits for and spares the holders the decodes that
 *     pile up on them at a light load. In [0, 1]; 1 (the default), 0 = off
 * @param timePrefillUsPerToken microseconds the engine takes to prefill one uncached token; above 0 it turns on the
 *     time model ({@link TimeCost}): every candidate is priced in predicted milliseconds instead of blocks, and
 *     the block weights but the credits and {@code step_tokens} are not read. 0 = off (the default)
 * @param timeStepUs the fixed time of one engine step (weights read once, launch and sampling overhead), in
 *     microseconds: vLLM's time per output token at one running request, minus the context term below
 * @param timeStepUsPerKtoken what each thousand resident context tokens add to a decode step, in microseconds: the
 *     slope of time per output token against the tokens the running requests hold
 */
public record Weights(
    double gpuCredit,
    double cpuCredit,
    double diskCredit,
    double predictedCredit,
    double overlapCreditDecay,
    double prefillLoadScale,
    double decodeLoadScale,
    double activeRequestWeight,
    double newPrefillWeight,
    double decodeReadWeight,
    double temperature,
    boolean imbalanceGate,
    double imbalanceAbs,
    double imbalanceRel,
    double newPrefillQueueWeight,
    double boundedLoad,
    double newPrefillEvictionWeight,
    double evictionShareFull,
    double hotPrefixRelief,
    double stepTokens,
    double newPrefillIdleRelief,
    double timePrefillUsPerToken,
    double timeStepUs,
    double timeStepUsPerKtoken) {

  /**
   * kvrouter's defaults: Dynamo's, but {@code new_prefill_weight} 1, which keeps best-of-N siblings and
   * conversation turns on the worker that is already computing their prefix; a decode weight of 0.1 per held
   * block ({@code decode_load_scale}) and 0.1 per block read per decode step ({@code decode_read_weight}), since a
   * block held by a decoding request delays a new request's first token far less than a block of prefill queued
   * ahead of it, while a block every decode step reads slows each memory-bound step of the worker (a worker holding
   * a popular document pays once per request reading it); and {@code new_prefill_eviction_weight} 8 reaching its
   * full value at an eviction share of 0.05: a fleet that keeps recomputing what it evicted charges a recomputed
   * block up to 9, one that evicts nothing that comes back stays at 1. Memory is the eviction term's to price, so
   * the held-block weight is only a tie-breaker. {@code hot_prefix_relief} 1: a prefix with two workers' share of
   * the requests or more is charged its wait only, so its holder's queue gets a second copy as soon as waiting
   * there costs more than computing it elsewhere. {@code new_prefill_idle_relief} 1: below that, a prefix other
   * requests reuse is charged its wait only on a worker the fleet leaves idle, so at a light load coding-agent
   * sessions stop piling their decodes on the two holders of their system prompt (docs/routing.md has the A/B
   * behind all six).
   */
  public static final Weights DEFAULTS = new Weights(1.0, 0.75, 0.25, 1.0, 0.0, 1.0, 0.1, 0.0, 1.0, 0.1, 0.0, false,
      32, 1.1, 0.0, 0.0, 8.0, 0.05, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0);

  /** Dynamo's published defaults exactly (anchors §1.1): {@code new_prefill_weight} 0. */
  public static final Weights DYNAMO = new Weights(1.0, 0.75, 0.25, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, false,
      32, 1.1, 0.0, 0.0, 0.0, 0.05, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);

  /** Every key accepted in configuration and in {@code x-kvrouter-weights}. */
  public static final List<String> KEYS = List.of("gpu_credit", "cpu_credit", "disk_credit", "predicted_credit",
      "overlap_credit_decay", "prefill_load_scale", "decode_load_scale", "active_request_weight",
      "new_prefill_weight", "decode_read_weight", "temperature",
      "imbalance_gate", "imbalance_abs", "imbalance_rel", "new_prefill_queue_weight",
      "bounded_load", "new_prefill_eviction_weight", "eviction_share_full", "hot_prefix_relief",
      "step_tokens", "new_prefill_idle_relief", "time_prefill_us_per_token", "time_step_us",
      "time_step_us_per_ktoken");

  /** Longest {@code x-kvrouter-weights} value read. */
  static final int MAX_HEADER = 1024;

  public Weights {
    check("gpu_credit", gpuCredit);
    check("cpu_credit", cpuCredit);
    check("disk_credit", diskCredit);
    check("predicted_credit", predictedCredit);
    check("overlap_credit_decay", overlapCreditDecay);
    check("prefill_load_scale", prefillLoadScale);
    check("decode_load_scale", decodeLoadScale);
    check("active_request_weight", activeRequestWeight);
    check("new_prefill_weight", newPrefillWeight);
    check("decode_read_weight", decodeReadWeight);
    check("temperature", temperature);
    check("imbalance_abs", imbalanceAbs);
    check("imbalance_rel", imbalanceRel);
    if (imbalanceRel < 1.0) {
      throw new IllegalArgumentException("imbalance_rel must be >= 1, was " + imbalanceRel);
    }
    check("new_prefill_queue_weight", newPrefillQueueWeight);
    check("bounded_load", boundedLoad);
    if (boundedLoad != 0 && boundedLoad < 1.0) {
      throw new IllegalArgumentException("bounded_load must be 0 (off) or >= 1, was " + boundedLoad);
    }
    check("new_prefill_eviction_weight", newPrefillEvictionWeight);
    check("eviction_share_full", evictionShareFull);
    if (evictionShareFull <= 0 || evictionShareFull > 1) {
      throw new IllegalArgumentException("eviction_share_full must be in (0, 1], was " + evictionShareFull);
    }
    check("hot_prefix_relief", hotPrefixRelief);
    if (hotPrefixRelief > 1) {
      throw new IllegalArgumentException("hot_prefix_relief must be in [0, 1], was " + hotPrefixRelief);
    }
    check("step_tokens", stepTokens);
    check("new_prefill_idle_relief", newPrefillIdleRelief);
    if (newPrefillIdleRelief > 1) {
      throw new IllegalArgumentException("new_prefill_idle_relief must be in [0, 1], was " + newPrefillIdleRelief);
    }
    check("time_prefill_us_per_token", timePrefillUsPerToken);
    check("time_step_us", timeStepUs);
    check("time_step_us_per_ktoken", timeStepUsPerKtoken);
  }

  /** Whether candidates are priced in predicted time ({@link TimeCost}) instead of blocks. */
  public boolean timeModel() {
    return timePrefillUsPerToken > 0;
  }

  private static void check(String key, double v) {
    if (!Double.isFinite(v) || v < 0) {
      throw new IllegalArgumentException(key + " must be a finite number >= 0, was " + v);
    }
  }

  /**
   * This set with one key changed.
   *
   * @throws IllegalArgumentException for an unknown key or a bad value
   */
  public Weights with(String key, String value) {
    String k = key.trim().toLowerCase(Locale.ROOT);
    String v = value.trim();
    if (k.equals("imbalance_gate")) {
      boolean b = switch (v.toLowerCase(Locale.ROOT)) {
        case "true", "1", "on" -> true;
        case "false", "0", "off" -> false;
        default -> throw new IllegalArgumentException("imbalance_gate must be true or false, was `" + v + "`");
      };
      return new Weights(gpuCredit, cpuCredit, diskCredit, predictedCredit, overlapCreditDecay, prefillLoadScale,
          decodeLoadScale, activeRequestWeight, newPrefillWeight, decodeReadWeight, temperature, b, imbalanceAbs,
          imbalanceRel, newPrefillQueueWeight, boundedLoad, newPrefillEvictionWeight, evictionShareFull,
          hotPrefixRelief, stepTokens, newPrefillIdleRelief, timePrefillUsPerToken, timeStepUs, timeStepUsPerKtoken);
    }
    double d;
    try {
      d = Double.parseDouble(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(k + " must be a number, was `" + v + "`");
    }
    return with(k, d);
  }

  /** This set with one numeric key changed. */
  public Weights with(String key, double d) {
    double[] f = {gpuCredit, cpuCredit, diskCredit, predictedCredit, overlapCreditDecay, prefillLoadScale,
        decodeLoadScale, activeRequestWeight, newPrefillWeight, decodeReadWeight, temperature, 0, imbalanceAbs,
        imbalanceRel, newPrefillQueueWeight, boundedLoad, newPrefillEvictionWeight, evictionShareFull,
        hotPrefixRelief, stepTokens, newPrefillIdleRelief, timePrefillUsPerToken, timeStepUs, timeStepUsPerKtoken};
    int i = KEYS.indexOf(key);
    if (i < 0 || key.equals("imbalance_gate")) {
      throw new IllegalArgumentException("unknown weight `" + key + "` (known: " + String.join(", ", KEYS) + ")");
    }
    f[i] = d;
    return new Weights(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], imbalanceGate, f[12],
        f[13], f[14], f[15], f[16], f[17], f[18], f[19], f[20], f[21], f[22], f[23]);
  }

  /**
   * Applies an {@code x-kvrouter-weights} value: comma-separated {@code key=value} pairs, e.g.
   * {@code prefill_load_scale=2,temperature=0.1}. All or nothing.
   *
   * @throws IllegalArgumentException naming the first bad pair
   */
  public Weights withOverrides(String header) {
    if (header == null || header.isBlank()) {
      return this;
    }
    if (header.length() > MAX_HEADER) {
      throw new IllegalArgumentException("weights override longer than " + MAX_HEADER + " characters");
    }
    Weights w = this;
    for (String pair : header.split(",")) {
      if (pair.isBlank()) {
        continue;
      }
      int eq = pair.indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException("expected key=value, got `" + pair.trim() + "`");
      }
      w = w.with(pair.substring(0, eq), pair.substring(eq + 1));
    }
    return w;
  }
}
