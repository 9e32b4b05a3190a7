package dev.kvrouter.index.wire;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * The engine cached newly full blocks.
 *
 * <p>Field order is vLLM's declaration order (which is also its array order). {@code cacheSalt} is not a
 * vLLM field: SGLang sends it as a top-level key (map era) or in a {@code metadata} map in array slot 7.
 *
 * @param blockHashes engine hashes of the new blocks, in chain order, never null
 * @param parentBlockHash engine hash of the block before the first new block, or {@code null} if the first
 *     new block is block 0 of its sequence
 * @param tokenIds the new blocks' tokens ({@code blockHashes.length * blockSize}); empty for some offload
 *     connectors; {@code null} if the engine sent a token format this decoder does not support
 * @param blockSize tokens per block of this KV-cache group
 * @param loraId deprecated adapter int id, or {@code null}
 * @param medium storage medium, {@code null} means GPU
 * @param loraName adapter name (enters the engine's block hash), or {@code null}
 * @param extraKeys per-block extra hash keys aligned with {@code blockHashes}: each entry {@code null} or a list
 *     of items ({@code String}, {@code Long}, {@code byte[]} or a nested {@code List<Object>} such as an
 *     {@code [identifier, offset]} multimodal pair); {@code null} if absent
 * @param groupIdx KV-cache group index (hybrid models), or {@code null}
 * @param kvCacheSpecKind kind of the group's KV spec ({@code "full_attention"}, ...), or {@code null}
 * @param kvCacheSpecSlidingWindow sliding window of the group, or {@code null}
 * @param locality {@code "LOCAL"}/{@code "REMOTE"}, or {@code null}
 * @param ownership secondary-tier owner id, or {@code null}
 * @param sessionId engine session id, or {@code null}
 * @param cacheSalt SGLang's cache salt, or {@code null} (vLLM carries its salt in {@code extraKeys})
 */
public record BlockStored(
    long[] blockHashes,
    Long parentBlockHash,
    int[] tokenIds,
    int blockSize,
    Integer loraId,
    String medium,
    String loraName,
    List<List<Object>> extraKeys,
    Integer groupIdx,
    String kvCacheSpecKind,
    Integer kvCacheSpecSlidingWindow,
    String locality,
    String ownership,
    String sessionId,
    String cacheSalt)
    implements KvEvent {

  public static final String TAG = "BlockStored";

  public BlockStored {
    Objects.requireNonNull(blockHashes, "blockHashes");
  }

  /** The common GPU shape: hashes, parent, tokens, block size and medium, nothing else. */
  public static BlockStored of(long[] blockHashes, Long parent, int[] tokenIds, int blockSize, String medium) {
    return new BlockStored(blockHashes, parent, tokenIds, blockSize, null, medium, null, null, null, null, null,
        null, null, null, null);
  }

  /** A copy with the given adapter name and per-block extra keys. */
  public BlockStored withLora(String name, List<List<Object>> keys) {
    return new BlockStored(blockHashes, parentBlockHash, tokenIds, blockSize, loraId, medium, name, keys, groupIdx,
        kvCacheSpecKind, kvCacheSpecSlidingWindow, locality, ownership, sessionId, cacheSalt);
  }

  /** A copy with the given per-block extra keys. */
  public BlockStored withExtraKeys(List<List<Object>> keys) {
    return withLora(loraName, keys);
  }

  /** A copy with the given KV-cache group and spec kind. */
  public BlockStored withGroup(Integer group, String kind) {
    return new BlockStored(blockHashes, parentBlockHash, tokenIds, blockSize, loraId, medium, loraName, extraKeys,
        group, kind, kvCacheSpecSlidingWindow, locality, ownership, sessionId, cacheSalt);
  }

  /** A copy with SGLang's cache salt. */
  public BlockStored withCacheSalt(String salt) {
    return new BlockStored(blockHashes, parentBlockHash, tokenIds, blockSize, loraId, medium, loraName, extraKeys,
        groupIdx, kvCacheSpecKind, kvCacheSpecSlidingWindow, locality, ownership, sessionId, salt);
  }

  @Override
  public String tag() {
    return TAG;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof BlockStored s
        && Arrays.equals(blockHashes, s.blockHashes)
        && Objects.equals(parentBlockHash, s.parentBlockHash)
        && Arrays.equals(tokenIds, s.tokenIds)
        && blockSize == s.blockSize
        && Objects.equals(loraId, s.loraId)
        && Objects.equals(medium, s.medium)
        && Objects.equals(loraName, s.loraName)
        && WireText.deepEquals(extraKeys, s.extraKeys)
        && Objects.equals(groupIdx, s.groupIdx)
        && Objects.equals(kvCacheSpecKind, s.kvCacheSpecKind)
        && Objects.equals(kvCacheSpecSlidingWindow, s.kvCacheSpecSlidingWindow)
        && Objects.equals(locality, s.locality)
        && Objects.equals(ownership, s.ownership)
        && Objects.equals(sessionId, s.sessionId)
        && Objects.equals(cacheSalt, s.cacheSalt);
  }

  @Override
  public int hashCode() {
    return Objects.hash(Arrays.hashCode(blockHashes), parentBlockHash, Arrays.hashCode(tokenIds), blockSize, medium,
        loraName, groupIdx);
  }

  /** Never prints token ids (logs must not carry prompt content); prints their count instead. */
  @Override
  public String toString() {
    StringBuilder b = new StringBuilder("BlockStored[hashes=").append(WireText.hashes(blockHashes));
    b.append(", parent=").append(parentBlockHash == null ? "null" : Long.toUnsignedString(parentBlockHash));
    b.append(", tokens=").append(tokenIds == null ? "unsupported" : tokenIds.length + " ids");
    b.append(", blockSize=").append(blockSize).append(", medium=").append(medium);
    if (loraId != null) {
      b.append(", loraId=").append(loraId);
    }
    if (loraName != null) {
      b.append(", loraName=").append(loraName);
    }
    if (extraKeys != null) {
      b.append(", extraKeys=").append(extraKeys.size()).append(" entries");
    }
    if (groupIdx != null) {
      b.append(", groupIdx=").append(groupIdx);
    }
    if (kvCacheSpecKind != null) {
      b.append(", kind=").append(kvCacheSpecKind);
    }
    if (locality != null) {
      b.append(", locality=").append(locality);
    }
    if (cacheSalt != null) {
      b.append(", cacheSalt=<set>");
    }
    return b.append(']').toString();
  }
}
