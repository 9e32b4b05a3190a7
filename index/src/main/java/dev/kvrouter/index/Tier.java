package dev.kvrouter.index;

import java.util.Locale;

/** Where a cached block lives on a worker; a routing cost gives GPU blocks full credit, lower tiers less. */
public enum Tier {
  GPU,
  CPU,
  DISK;

  /**
   * Maps an engine's {@code medium} string to a tier. {@code null} means GPU by convention (vLLM's GPU pool);
   * the vocabulary covers vLLM (GPU, CPU, FS, OBJ, STORAGE), SGLang (CPU_PINNED, DISK) and LMCache.
   * Returns {@code null} for media the router must not count (remote or external storage it cannot reach
   * through this worker's prefill).
   */
  public static Tier fromMedium(String medium) {
    if (medium == null || medium.isEmpty()) {
      return GPU;
    }
    switch (medium.toUpperCase(Locale.ROOT)) {
      case "GPU":
      case "DEVICE":
      case "CUDA":
        return GPU;
      case "CPU":
      case "CPU_PINNED":
      case "CPU_TIER1":
      case "HOST":
        return CPU;
      case "CPU_TIER2":
      case "DISK":
      case "NVME":
      case "FS":
      case "STORAGE":
      case "SHARED_STORAGE":
      case "OBJ":
        return DISK;
      default:
        return null;
    }
  }
}
