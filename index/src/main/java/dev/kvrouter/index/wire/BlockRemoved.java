package dev.kvrouter.index.wire;

import java.util.Arrays;
import java.util.Objects;

/**
 * The engine evicted blocks from one medium. vLLM sends one hash per event; the format allows several.
 *
 * @param blockHashes engine block hashes (handles), never null
 * @param medium {@code "GPU"}, {@code "CPU"}, ...; {@code null} means GPU by convention
 * @param groupIdx KV-cache group of hybrid models, or {@code null}
 * @param locality {@code "LOCAL"}/{@code "REMOTE"} (vLLM >= 0.26), or {@code null}
 * @param ownership secondary-tier owner id (vLLM, Aug 2026), or {@code null}
 */
public record BlockRemoved(long[] blockHashes, String medium, Integer groupIdx, String locality, String ownership)
    implements KvEvent {

  public static final String TAG = "BlockRemoved";

  public BlockRemoved {
    Objects.requireNonNull(blockHashes, "blockHashes");
  }

  /** The common shape: hashes and medium only. */
  public static BlockRemoved of(String medium, long... blockHashes) {
    return new BlockRemoved(blockHashes, medium, null, null, null);
  }

  @Override
  public String tag() {
    return TAG;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof BlockRemoved r
        && Arrays.equals(blockHashes, r.blockHashes)
        && Objects.equals(medium, r.medium)
        && Objects.equals(groupIdx, r.groupIdx)
        && Objects.equals(locality, r.locality)
        && Objects.equals(ownership, r.ownership);
  }

  @Override
  public int hashCode() {
    return Objects.hash(Arrays.hashCode(blockHashes), medium, groupIdx, locality, ownership);
  }

  @Override
  public String toString() {
    return "BlockRemoved[hashes=" + WireText.hashes(blockHashes) + ", medium=" + medium + ", groupIdx=" + groupIdx
        + (locality != null ? ", locality=" + locality : "") + (ownership != null ? ", ownership=" + ownership : "")
        + "]";
  }
}
