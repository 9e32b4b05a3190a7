package dev.kvrouter.examples.sim.timing;

import java.util.Objects;

/**
 * A roofline step-time model: a step is as slow as the slower of its compute and its memory traffic, plus a
 * fixed per-step overhead (scheduling, kernel launches, sampling on the host).
 *
 * <pre>
 *   flops = 2 * linearParams * newTokens            (projections and MLP, every new token)
 *         + 2 * lmHeadParams * sampledSeqs          (logits, one row per sampling request)
 *         + 4 * layers * queryHeads * headDim * attentionPairs   (QK^T and PV)
 *         + vision.flopsPerItem * encodedItems     (the vision encoder, on images not found in a cache)
 *   bytes = weightBytes                              (every step reads all weights once)
 *         + kvBytesPerToken * (kvTokensRead + newTokens)         (attention reads context, writes new KV)
 *         + vision.weightBytes if any image is encoded
 *   step  = overhead + max(flops / (peakFlops * mfu), bytes / (bandwidth * bandwidthEfficiency))
 * </pre>
 *
 * <p>Prefill is compute-bound (thousands of tokens share one weight read); decode is bandwidth-bound (weights
 * plus every running request's KV are read to produce one token each). The efficiency factors and the
 * calibration against published measurements are in {@code docs/simulator.md}.
 *
 * @param model the model shape
 * @param gpu the GPU roofline
 * @param mfu achieved fraction of peak FLOP/s on compute-bound steps
 * @param bandwidthEfficiency achieved fraction of HBM bandwidth on memory-bound steps
 * @param overheadNanos fixed cost of a non-empty step
 * @param hostLinkEfficiency achieved fraction of the GPU's one-way host link bandwidth for KV copies to and from
 *     host memory: {@code transfer = tokens * kvBytesPerToken / (hostLinkBandwidth * hostLinkEfficiency)}
 * @param vision the vision tower of a multimodal model, or null: then images cost what their placeholder tokens
 *     cost as text
 */
public record RooflineTimingModel(ModelSpec model, GpuSpec gpu, double mfu, double bandwidthEfficiency,
    long overheadNanos, double hostLinkEfficiency, VisionEncoder vision) implements TimingModel {

  public RooflineTimingModel {
    Objects.requireNonNull(model, "model");
    Objects.requireNonNull(gpu, "gpu");
    if (!(mfu > 0 && mfu <= 1) || !(bandwidthEfficiency > 0 && bandwidthEfficiency <= 1) || overheadNanos < 0
        || !(hostLinkEfficiency > 0 && hostLinkEfficiency <= 1)) {
      throw new IllegalArgumentException("efficiencies must be in (0, 1] and overhead >= 0");
    }
  }

  /** Without an offload figure: the presets' host link efficiency; text only. */
  public RooflineTimingModel(ModelSpec model, GpuSpec gpu, double mfu, double bandwidthEfficiency,
      long overheadNanos) {
    this(model, gpu, mfu, bandwidthEfficiency, overheadNanos, Presets.HOST_LINK_EFFICIENCY, null);
  }

  @Override
  public long kvTransferNanos(long tokens) {
    if (tokens <= 0) {
      return 0;
    }
    return (long) Math.ceil(kvBytes(tokens) / (gpu.hostLinkBandwidth() * hostLinkEfficiency) * 1e9);
  }

  @Override
  public long kvBytes(long tokens) {
    return tokens * model.kvBytesPerToken();
  }

  @Override
  public long stepNanos(StepWork w) {
    if (w.newTokens() <= 0) {
      return 0;
    }
    double flops = 2.0 * model.linearParams() * w.newTokens()
        + 2.0 * model.lmHeadParams() * w.sampledSeqs()
        + 4.0 * model.layers() * model.queryHeads() * model.headDim() * w.attentionPairs();
    double bytes = model.weightBytes()
        + (double) model.kvBytesPerToken() * (w.kvTokensRead() + w.newTokens());
    if (vision != null && w.encodedItems() > 0) {
      flops += vision.flopsPerItem() * w.encodedItems();
      bytes += vision.weightBytes();
    }
    double compute = flops / (gpu.peakFlops() * mfu);
    double memory = bytes / (gpu.memoryBandwidth() * bandwidthEfficiency);
    return overheadNanos + (long) Math.ceil(Math.max(compute, memory) * 1e9);
  }

  /** The step time scaled by {@code factor} (a slowed-down worker); used by fault injection. */
  public static TimingModel scaled(TimingModel base, double factor) {
    if (!(factor > 0)) {
      throw new IllegalArgumentException("slowdown factor must be positive, was " + factor);
    }
    return new TimingModel() {
      @Override
      public long stepNanos(StepWork w) {
        return (long) Math.ceil(base.stepNanos(w) * factor);
      }

      @Override
      public long kvTransferNanos(long tokens) {
        return base.kvTransferNanos(tokens);
      }

      @Override
      public long kvBytes(long tokens) {
        return base.kvBytes(tokens);
      }
    };
  }
}
