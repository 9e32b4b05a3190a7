package dev.kvrouter.examples.sim.events;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * A KV-cache event as a vLLM engine emits it (the fields of {@code vllm.distributed.kv_events}), before any
 * wire encoding. Block hashes here are the engine's own per-process handles, never the router's identity.
 *
 * <p>Records hold arrays; treat them as immutable once published.
 */
public sealed interface KvEvent permits KvEvent.BlockStored, KvEvent.BlockRemoved, KvEvent.AllBlocksCleared {

  /** vLLM's {@code MEDIUM_GPU}. */
  String MEDIUM_GPU = "GPU";

  /**
   * Full blocks that became cached, consecutive in one request's chain.
   *
   * @param blockHashes engine hashes of the new blocks, in chain order
   * @param parentBlockHash engine hash of the block before the first one, or {@code null} at the chain root
   * @param tokenIds the tokens of all new blocks ({@code blockHashes.length * blockSize})
   * @param blockSize tokens per block
   * @param medium {@link #MEDIUM_GPU}
   * @param loraName the LoRA adapter, or {@code null} for the base model
   * @param extraKeys per block, vLLM's extra hash keys (LoRA name on every block, cache salt on block 0), each
   *     entry {@code null} when the block has none; the whole list is {@code null} when no block has any
   */
  record BlockStored(long[] blockHashes, Long parentBlockHash, int[] tokenIds, int blockSize, String medium,
      String loraName, List<List<String>> extraKeys) implements KvEvent {

    public BlockStored {
      Objects.requireNonNull(blockHashes, "blockHashes");
      Objects.requireNonNull(tokenIds, "tokenIds");
      if (tokenIds.length != blockHashes.length * blockSize) {
        throw new IllegalArgumentException("token_ids must hold " + blockHashes.length + " blocks of " + blockSize);
      }
    }

    @Override
    public String toString() {
      return "BlockStored" + Arrays.toString(blockHashes) + " parent=" + parentBlockHash + " tokens="
          + tokenIds.length + " lora=" + loraName;
    }
  }

  /** Blocks evicted from the medium. vLLM emits one event per evicted block. */
  record BlockRemoved(long[] blockHashes, String medium) implements KvEvent {

    public BlockRemoved {
      Objects.requireNonNull(blockHashes, "blockHashes");
    }

    @Override
    public String toString() {
      return "BlockRemoved" + Arrays.toString(blockHashes);
    }
  }

  /** The whole prefix cache was dropped (reset or engine restart). */
  record AllBlocksCleared() implements KvEvent {}
}
