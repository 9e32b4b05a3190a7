package dev.kvrouter.examples.ab;

import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.events.EventFaults;
import dev.kvrouter.examples.sim.fleet.MultimodalModels;
import dev.kvrouter.examples.sim.timing.Preset;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.extproc.model.MultimodalSpec;
import dev.kvrouter.index.wire.WireLayout;
import java.time.Duration;
import java.util.Objects;

/**
 * The fleet, event plane and router settings of a virtual-time run: everything but the workload and the policy.
 *
 * @param workers simulated workers
 * @param preset model and GPU: step timing, KV capacity ({@code num_gpu_blocks}), context length
 * @param blockSize KV block size (engines and router)
 * @param model the served model name (engine namespace = router namespace); null for the preset's model
 * @param maxNumSeqs {@code --max-num-seqs}, 0 for vLLM's default on the preset's GPU ({@link Preset#batchLimits()})
 * @param maxNumBatchedTokens {@code --max-num-batched-tokens}, 0 for vLLM's default on the preset's GPU
 * @param numGpuBlocks KV blocks per worker, 0 for the preset's calibrated capacity
 * @param maxModelLen context length, 0 for the preset's
 * @param layout wire layout every event batch is encoded in and decoded from on its way to the router (the
 *     subscriber's decoder and sequence follower run); null applies the engine's records directly (no decode, no
 *     sequence logic: only valid without faults)
 * @param replayBufferSteps batches each engine keeps for replay (vLLM: 10,000), 0 for no replay: then a dropped
 *     batch is a gap the router cannot fill and the worker's view goes stale
 * @param faults event faults of every worker (delay, drop, reorder)
 * @param sampleInterval how often each worker's running/waiting queue is sampled for the report
 * @param scrapeInterval how often the router's load view gets each worker's reported load (the runtime's
 *     {@code routing.scrape.interval_ms}); zero for ledger only
 * @param weights a trusted {@code x-kvrouter-weights} override for every request, or null for the defaults
 * @param predictedTtl lifetime of the router's predicted entries (kvrouter.yaml {@code events.predicted_ttl_ms})
 * @param staleRecovery quiet period after which a stale view is trusted again ({@code events.stale_recovery_ms})
 * @param staleViewTrust credit a stale view as far as usage reports confirm it ({@code events.stale_view_trust})
 * @param seed seeds the engines, the event faults and the router's tie-breaks
 * @param kvOffloadingSizeGib per worker, GiB of vLLM's native CPU offload tier ({@code --kv-offloading-size}), 0 = off
 * @param multimodal the served model's media expansion, a {@link MultimodalModels} preset name (the router's
 *     {@code multimodal: {preset: <name>}}, e.g. {@code gemma3}), or null for a text model. The engines then check
 *     prompt ids against that model's vocabulary; the timing stays the preset's (media tokens are timed as text)
 * @param routerReplicas router replicas behind the proxy, each with its own index (events and its own
 *     predictions), ledger and scrapes, requests dealt to them in turn as Envoy's round-robin ext_proc cluster does
 * @param replicaSyncDelay with several replicas: each tells the others of its reservations and predictions
 *     ({@code ReplicaSync}, kvrouter.yaml {@code replicas:}), delivered this long after they happen; null: they
 *     share nothing but the workers' scraped load
 */
public record VirtualSetup(
    int workers,
    Preset preset,
    int blockSize,
    String model,
    int maxNumSeqs,
    int maxNumBatchedTokens,
    int numGpuBlocks,
    int maxModelLen,
    WireLayout layout,
    int replayBufferSteps,
    EventFaults faults,
    Duration sampleInterval,
    Duration scrapeInterval,
    String weights,
    Duration predictedTtl,
    Duration staleRecovery,
    boolean staleViewTrust,
    long seed,
    double kvOffloadingSizeGib,
    String multimodal,
    int routerReplicas,
    Duration replicaSyncDelay) {

  public VirtualSetup {
    Objects.requireNonNull(preset, "preset");
    faults = faults == null ? EventFaults.NONE : faults;
    model = model == null ? preset.model().name() : model;
    if (workers < 1 || workers > 1024) {
      throw new IllegalArgumentException("workers must be in [1, 1024]");
    }
    if (blockSize < 1 || maxNumSeqs < 0 || maxNumBatchedTokens < 0 || numGpuBlocks < 0 || maxModelLen < 0
        || replayBufferSteps < 0) {
      throw new IllegalArgumentException("blockSize must be >= 1; maxNumSeqs, maxNumBatchedTokens, numGpuBlocks, "
          + "maxModelLen, replayBufferSteps >= 0");
    }
    if (sampleInterval.isNegative() || sampleInterval.isZero() || scrapeInterval.isNegative()) {
      throw new IllegalArgumentException("sampleInterval must be > 0, scrapeInterval >= 0");
    }
    if (!(kvOffloadingSizeGib >= 0) || Double.isInfinite(kvOffloadingSizeGib)) {
      throw new IllegalArgumentException("kvOffloadingSizeGib must be a finite number >= 0");
    }
    if (routerReplicas < 1 || routerReplicas > 64) {
      throw new IllegalArgumentException("routerReplicas must be in [1, 64]");
    }
    if (replicaSyncDelay != null && replicaSyncDelay.isNegative()) {
      throw new IllegalArgumentException("replicaSyncDelay must be >= 0");
    }
    if (multimodal != null) {
      MultimodalModels.preset(multimodal); // refuses a name the router does not know
    }
    if (layout == null && (faults.dropRate() > 0 || faults.reorderRate() > 0 || faults.stopped())) {
      throw new IllegalArgumentException("event drops and reordering need a wire layout (the sequence follower "
          + "is what notices them)");
    }
  }

  /**
   * 8 workers of {@code llama3.1-8b-h100} at their calibrated capacity, vLLM's defaults (block 16, the scheduler
   * limits vLLM picks for the preset's GPU: 1024 seqs and 8192 batched tokens on the H100), events in vLLM's map layout with a 10,000-batch replay buffer, no faults, 250 ms
   * samples and scrapes, default weights, 5 s predicted entries, 60 s stale recovery, stale views credited as
   * far as usage confirms them, one router.
   */
  public static VirtualSetup defaults() {
    return new VirtualSetup(8, Presets.byId("llama3.1-8b-h100"), EngineConfig.DEFAULT_BLOCK_SIZE, null,
        0, 0, 0, 0, WireLayout.VLLM_MAP,
        10_000, EventFaults.NONE, Duration.ofMillis(250), Duration.ofMillis(250), null, Duration.ofSeconds(5),
        Duration.ofSeconds(60), true, 1, 0, null, 1, null);
  }

  public VirtualSetup withWorkers(int n) {
    return toBuilder().workers(n).build();
  }

  /** Another model and GPU; the served model name follows the preset. */
  public VirtualSetup withPreset(Preset p) {
    return toBuilder().preset(p).model(p.model().name()).build();
  }

  public VirtualSetup withModel(String m) {
    return toBuilder().model(m).build();
  }

  public VirtualSetup withBlockSize(int b) {
    return toBuilder().blockSize(b).build();
  }

  public VirtualSetup withNumGpuBlocks(int n) {
    return toBuilder().numGpuBlocks(n).build();
  }

  public VirtualSetup withMaxModelLen(int n) {
    return toBuilder().maxModelLen(n).build();
  }

  public VirtualSetup withEngineLimits(int seqs, int batchedTokens) {
    return toBuilder().maxNumSeqs(seqs).maxNumBatchedTokens(batchedTokens).build();
  }

  public VirtualSetup withEvents(WireLayout l, int replaySteps, EventFaults f) {
    return toBuilder().layout(l).replayBufferSteps(replaySteps).faults(f).build();
  }

  public VirtualSetup withSampleInterval(Duration d) {
    return toBuilder().sampleInterval(d).build();
  }

  public VirtualSetup withScrapeInterval(Duration d) {
    return toBuilder().scrapeInterval(d).build();
  }

  public VirtualSetup withWeights(String w) {
    return toBuilder().weights(w).build();
  }

  public VirtualSetup withStaleRecovery(Duration d) {
    return toBuilder().staleRecovery(d).build();
  }

  public VirtualSetup withStaleViewTrust(boolean on) {
    return toBuilder().staleViewTrust(on).build();
  }

  public VirtualSetup withSeed(long s) {
    return toBuilder().seed(s).build();
  }

  /** A CPU offload tier of {@code gib} GiB per worker (0 = off). */
  public VirtualSetup withKvOffloadingSize(double gib) {
    return toBuilder().kvOffloadingSizeGib(gib).build();
  }

  /** Lifetime of the router's predicted entries ({@code events.predicted_ttl_ms}). */
  public VirtualSetup withPredictedTtl(Duration d) {
    return toBuilder().predictedTtl(d).build();
  }

  /** A multimodal model whose media are expanded as the router's {@code multimodal: {preset: <name>}}; null: text. */
  public VirtualSetup withMultimodal(String preset) {
    return toBuilder().multimodal(preset).build();
  }

  /** Replicas share reservations and predictions, delivered after {@code delay}; null: they share nothing. */
  public VirtualSetup withReplicaSync(Duration delay) {
    return toBuilder().replicaSyncDelay(delay).build();
  }

  /** {@code n} router replicas, requests dealt to them in turn. */
  public VirtualSetup withRouterReplicas(int n) {
    return toBuilder().routerReplicas(n).build();
  }

  /** The media expansion of {@link #multimodal}, or null for a text model. */
  public MultimodalSpec multimodalSpec() {
    return multimodal == null ? null : MultimodalModels.preset(multimodal);
  }

  private Builder toBuilder() {
    Builder b = new Builder();
    b.workers = workers;
    b.preset = preset;
    b.blockSize = blockSize;
    b.model = model;
    b.maxNumSeqs = maxNumSeqs;
    b.maxNumBatchedTokens = maxNumBatchedTokens;
    b.numGpuBlocks = numGpuBlocks;
    b.maxModelLen = maxModelLen;
    b.layout = layout;
    b.replayBufferSteps = replayBufferSteps;
    b.faults = faults;
    b.sampleInterval = sampleInterval;
    b.scrapeInterval = scrapeInterval;
    b.weights = weights;
    b.predictedTtl = predictedTtl;
    b.staleRecovery = staleRecovery;
    b.staleViewTrust = staleViewTrust;
    b.seed = seed;
    b.kvOffloadingSizeGib = kvOffloadingSizeGib;
    b.multimodal = multimodal;
    b.routerReplicas = routerReplicas;
    b.replicaSyncDelay = replicaSyncDelay;
    return b;
  }

  /** Copy-and-change helper behind the withers. */
  private static final class Builder {
    int workers;
    Preset preset;
    int blockSize;
    String model;
    int maxNumSeqs;
    int maxNumBatchedTokens;
    int numGpuBlocks;
    int maxModelLen;
    WireLayout layout;
    int replayBufferSteps;
    EventFaults faults;
    Duration sampleInterval;
    Duration scrapeInterval;
    String weights;
    Duration predictedTtl;
    Duration staleRecovery;
    boolean staleViewTrust;
    long seed;
    double kvOffloadingSizeGib;
    String multimodal;
    int routerReplicas;
    Duration replicaSyncDelay;

    Builder workers(int v) { workers = v; return this; }
    Builder preset(Preset v) { preset = v; return this; }
    Builder blockSize(int v) { blockSize = v; return this; }
    Builder model(String v) { model = v; return this; }
    Builder maxNumSeqs(int v) { maxNumSeqs = v; return this; }
    Builder maxNumBatchedTokens(int v) { maxNumBatchedTokens = v; return this; }
    Builder numGpuBlocks(int v) { numGpuBlocks = v; return this; }
    Builder maxModelLen(int v) { maxModelLen = v; return this; }
    Builder layout(WireLayout v) { layout = v; return this; }
    Builder replayBufferSteps(int v) { replayBufferSteps = v; return this; }
    Builder faults(EventFaults v) { faults = v; return this; }
    Builder sampleInterval(Duration v) { sampleInterval = v; return this; }
    Builder scrapeInterval(Duration v) { scrapeInterval = v; return this; }
    Builder weights(String v) { weights = v; return this; }
    Builder staleRecovery(Duration v) { staleRecovery = v; return this; }
    Builder staleViewTrust(boolean v) { staleViewTrust = v; return this; }
    Builder predictedTtl(Duration v) { predictedTtl = v; return this; }
    Builder multimodal(String v) { multimodal = v; return this; }
    Builder seed(long v) { seed = v; return this; }
    Builder kvOffloadingSizeGib(double v) { kvOffloadingSizeGib = v; return this; }
    Builder routerReplicas(int v) { routerReplicas = v; return this; }
    Builder replicaSyncDelay(Duration v) { replicaSyncDelay = v; return this; }

    VirtualSetup build() {
      return new VirtualSetup(workers, preset, blockSize, model, maxNumSeqs, maxNumBatchedTokens, numGpuBlocks,
          maxModelLen, layout, replayBufferSteps, faults, sampleInterval, scrapeInterval, weights, predictedTtl,
          staleRecovery, staleViewTrust, seed, kvOffloadingSizeGib, multimodal, routerReplicas,
          replicaSyncDelay);
    }
  }

  /** The engine arguments of worker {@code i}. */
  public EngineConfig engineConfig(int i) {
    EngineConfig.Builder b = EngineConfig.fromPreset(preset, blockSize).model(model).seed(seed * 1_000 + 1 + i)
        .numCpuBlocks(preset.numCpuBlocks(blockSize, kvOffloadingSizeGib));
    if (multimodal != null) {
      // the served model is the multimodal one: its ids (the image soft token too) go up to its own vocabulary
      b.vocabSize(MultimodalModels.vocabSize(MultimodalModels.preset(multimodal)));
    }
    return b.overrides(numGpuBlocks, maxNumSeqs, maxNumBatchedTokens, maxModelLen).build();
  }

  public String workerName(int i) {
    return "sim-" + i;
  }
}
