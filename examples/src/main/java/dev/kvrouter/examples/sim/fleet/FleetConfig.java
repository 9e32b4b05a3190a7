package dev.kvrouter.examples.sim.fleet;

import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.http.FaultControl;
import dev.kvrouter.examples.sim.http.ScriptedOutput;
import dev.kvrouter.examples.sim.timing.Preset;
import dev.kvrouter.extproc.model.MultimodalSpec;
import dev.kvrouter.index.wire.WireLayout;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;

/**
 * A fleet of simulated workers in one JVM: worker {@code i} is {@code <namePrefix><i>} on HTTP port
 * {@code httpBasePort + i} with its KV events on {@code eventsBasePort + i} (replay on
 * {@code replayBasePort + i}). A base port of 0 gives every worker an ephemeral port.
 *
 * @param workers how many workers
 * @param namePrefix worker name prefix
 * @param bind listen address (loopback by default)
 * @param httpBasePort first HTTP port, or 0
 * @param events whether workers publish KV events
 * @param eventsBasePort first PUB port, or 0
 * @param replayBasePort first ROUTER replay port, 0 = ephemeral, -1 = no replay
 * @param topic event topic
 * @param layout event layout
 * @param preset model and GPU: timing, KV capacity, context length
 * @param model served model name, or {@code null} for the preset's model id
 * @param adapters LoRA adapters every worker accepts
 * @param tokenizer directory (or file) of the model's {@code tokenizer.json} for text prompts, or {@code null}
 *     for token-id prompts only
 * @param blockSize KV block size
 * @param numGpuBlocks KV blocks, or 0 for the preset's capacity
 * @param maxNumSeqs {@code --max-num-seqs}, 0 for vLLM's default on the preset's GPU ({@link Preset#batchLimits()})
 * @param maxNumBatchedTokens {@code --max-num-batched-tokens}, 0 for vLLM's default on the preset's GPU
 * @param maxModelLen context length, or 0 for the preset's
 * @param longPrefillTokenThreshold {@code --long-prefill-token-threshold}
 * @param enablePrefixCaching prefix caching on or off
 * @param seed 0 for fresh random engine seeds (like real processes), else worker {@code i} uses {@code seed + i}
 * @param faults initial faults of every worker
 * @param writerThreads threads writing HTTP responses for the whole fleet
 * @param kvOffloadingSizeGib GiB of vLLM's native CPU offload tier per worker ({@code --kv-offloading-size}),
 *     0 = off
 * @param multimodal the served model's media expansion (the router's {@code multimodal:} entry, e.g.
 *     {@code {preset: gemma3}}), or {@code null} for a text-only model; needs {@code tokenizer}
 * @param scriptedOutput a request's {@code seed} names its output, tokens of a workload's token space
 *     ({@link ScriptedOutput}; {@code kvrouter-sim --output-tokens workload:LO..HI}), or {@code null} for the
 *     default readable output
 */
public record FleetConfig(
    int workers,
    String namePrefix,
    String bind,
    int httpBasePort,
    boolean events,
    int eventsBasePort,
    int replayBasePort,
    String topic,
    WireLayout layout,
    Preset preset,
    String model,
    List<String> adapters,
    Path tokenizer,
    int blockSize,
    int numGpuBlocks,
    int maxNumSeqs,
    int maxNumBatchedTokens,
    int maxModelLen,
    int longPrefillTokenThreshold,
    boolean enablePrefixCaching,
    long seed,
    FaultControl.Update faults,
    int writerThreads,
    double kvOffloadingSizeGib,
    MultimodalSpec multimodal,
    ScriptedOutput scriptedOutput) {

  public FleetConfig {
    Objects.requireNonNull(namePrefix, "namePrefix");
    Objects.requireNonNull(bind, "bind");
    Objects.requireNonNull(preset, "preset");
    adapters = adapters == null ? List.of() : List.copyOf(adapters);
    topic = topic == null ? "" : topic;
    layout = layout == null ? WireLayout.VLLM_MAP : layout;
    faults = faults == null ? FaultControl.Update.NONE : faults;
    if (workers < 1 || workers > 1024) {
      throw new IllegalArgumentException("workers must be in [1, 1024]");
    }
    checkBase("http base port", httpBasePort, workers);
    checkBase("events base port", eventsBasePort, workers);
    if (replayBasePort != -1) {
      checkBase("replay base port", replayBasePort, workers);
    }
    if (writerThreads < 1) {
      throw new IllegalArgumentException("writerThreads must be >= 1");
    }
    if (maxNumSeqs < 0 || maxNumBatchedTokens < 0) {
      throw new IllegalArgumentException("maxNumSeqs and maxNumBatchedTokens must be >= 0 (0: the preset's)");
    }
    if (!(kvOffloadingSizeGib >= 0) || Double.isInfinite(kvOffloadingSizeGib)) {
      throw new IllegalArgumentException("kvOffloadingSizeGib must be a finite number >= 0");
    }
    if (multimodal != null) {
      List<String> problems = multimodal.validate("multimodal");
      if (!problems.isEmpty()) {
        throw new IllegalArgumentException(String.join("; ", problems));
      }
      if (tokenizer == null) {
        throw new IllegalArgumentException("a multimodal model needs its tokenizer (media are expanded into its "
            + "token ids)");
      }
    }
  }

  /** A text-only model without a CPU offload tier, with the default output. */
  public FleetConfig(int workers, String namePrefix, String bind, int httpBasePort, boolean events,
      int eventsBasePort, int replayBasePort, String topic, WireLayout layout, Preset preset, String model,
      List<String> adapters, Path tokenizer, int blockSize, int numGpuBlocks, int maxNumSeqs, int maxNumBatchedTokens,
      int maxModelLen, int longPrefillTokenThreshold, boolean enablePrefixCaching, long seed,
      FaultControl.Update faults, int writerThreads) {
    this(workers, namePrefix, bind, httpBasePort, events, eventsBasePort, replayBasePort, topic, layout, preset, model,
        adapters, tokenizer, blockSize, numGpuBlocks, maxNumSeqs, maxNumBatchedTokens, maxModelLen,
        longPrefillTokenThreshold, enablePrefixCaching, seed, faults, writerThreads, 0, null, null);
  }

  private static void checkBase(String what, int base, int n) {
    if (base != 0 && (base < 1 || base + n - 1 > 65535)) {
      throw new IllegalArgumentException(what + " " + base + " leaves no room for " + n + " workers");
    }
  }

  /** The engine arguments of worker {@code i}. */
  public EngineConfig engineConfig(int i) {
    EngineConfig.Builder b = EngineConfig.fromPreset(preset, blockSize)
        .model(model != null ? model : preset.model().name())
        .adapters(adapters)
        .longPrefillTokenThreshold(longPrefillTokenThreshold)
        .enablePrefixCaching(enablePrefixCaching)
        .seed(seed == 0 ? 0 : seed + i)
        .numCpuBlocks(preset.numCpuBlocks(blockSize, kvOffloadingSizeGib));
    if (multimodal != null) {
      // the served model is the multimodal one, not the timing preset's: its token ids (and the media soft
      // tokens) go up to its own vocabulary
      b.vocabSize(MultimodalModels.vocabSize(multimodal));
    }
    return b.overrides(numGpuBlocks, maxNumSeqs, maxNumBatchedTokens, maxModelLen).build();
  }

  /** The served model name. */
  public String servedModel() {
    return model != null ? model : preset.model().name();
  }

  public String workerName(int i) {
    return namePrefix + i;
  }

  static int port(int base, int i) {
    return base == 0 ? 0 : base + i;
  }
}
