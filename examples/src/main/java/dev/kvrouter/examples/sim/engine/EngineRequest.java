package dev.kvrouter.examples.sim.engine;

import dev.kvrouter.index.block.BlockHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The engine's mutable state of one request (vLLM's {@code Request} plus the cache manager's per-request
 * block table). Owned by the engine thread.
 */
final class EngineRequest {

  /** vLLM's request states; {@code WAITING_FOR_KV} is {@code WAITING_FOR_REMOTE_KVS}: an offload load is in flight. */
  enum Status { WAITING, WAITING_FOR_KV, RUNNING, PREEMPTED, FINISHED }

  final String id;
  final RequestObserver observer;
  final long arrivalNanos;
  final int numPromptTokens;
  final int maxTokens;
  final long rootSeed;
  final String loraName;
  final String cacheSalt;
  final long outputSeed;
  /** Media items by position; empty for text. */
  final MediaSpan[] media;
  /** The first media item not yet reached by a scheduled chunk (encoded, found in a cache, or in the prefix hit). */
  int nextMedia;
  private final int blockSize;

  /** Prompt then output tokens; capacity prompt + maxTokens. */
  final int[] tokens;
  int numTokens;
  /** Identity hashes of the full blocks of {@code tokens}, computed lazily. */
  private long[] blockHashes;
  private int numHashed;

  /** The request's block table (vLLM's {@code req_to_blocks}). */
  int[] blocks;
  int numBlocks;
  /** How many leading blocks of the table are cached (vLLM's {@code num_cached_block}). */
  int numCachedBlocks;

  int numComputedTokens;
  /** Prompt tokens served from cache at first scheduling, -1 until then (vLLM's {@code num_cached_tokens}). */
  int numCachedTokens = -1;
  int numPreemptions;
  /** Offload: next full block to store to CPU (the connector's {@code next_stored_block_idx}). */
  int nextStoredBlock;
  /** Offload: prompt tokens found on GPU at the lookup that started a CPU load, -1 when no load started. */
  int localHitTokens = -1;
  /** Offload: tokens loaded from CPU ({@code num_external_computed_tokens}). */
  int externalTokens;
  int numOutputTokens;
  long firstTokenNanos = -1;
  long lastTokenNanos = -1;
  Status status = Status.WAITING;

  EngineRequest(RequestSpec spec, long rootSeed, int blockSize, RequestObserver observer, long arrivalNanos) {
    this.id = spec.id();
    this.observer = observer;
    this.arrivalNanos = arrivalNanos;
    this.numPromptTokens = spec.promptTokens().length;
    this.maxTokens = spec.maxTokens();
    this.rootSeed = rootSeed;
    this.loraName = spec.adapter();
    this.cacheSalt = spec.cacheSalt();
    this.outputSeed = spec.outputSeed();
    this.media = spec.media().toArray(new MediaSpan[0]);
    this.blockSize = blockSize;
    this.tokens = Arrays.copyOf(spec.promptTokens(), numPromptTokens + maxTokens);
    this.numTokens = numPromptTokens;
    this.blockHashes = new long[Math.max(1, tokens.length / blockSize)];
    this.blocks = new int[Math.max(1, (tokens.length + blockSize - 1) / blockSize)];
  }

  /** Identity of full block {@code i} (the chain of {@code BlockHasher} from the namespace root). */
  long blockHash(int i) {
    if ((i + 1) * blockSize > numTokens) {
      throw new IllegalStateException("block " + i + " of request is not full");
    }
    while (numHashed <= i) {
      long parent = numHashed == 0 ? rootSeed : blockHashes[numHashed - 1];
      long extra = media.length == 0 ? 0L : mediaExtra(numHashed);
      blockHashes[numHashed] = BlockHasher.blockHash(parent, tokens, numHashed * blockSize, blockSize, extra);
      numHashed++;
    }
    return blockHashes[i];
  }

  /**
   * Identities of full blocks {@code [0, n)}, in the first {@code n} slots of the returned array (the request's
   * own, which the caller must not change).
   */
  long[] blockHashes(int n) {
    if (n > 0) {
      blockHash(n - 1);
    }
    return blockHashes;
  }

  /**
   * vLLM's multimodal extra keys of block {@code i} ({@code _gen_mm_extra_hash_keys}): {@code [identifier,
   * offset - block_start]} of every item overlapping the block, in position order (the offset is negative for an
   * item that began in an earlier block). Empty for a block no item overlaps.
   */
  List<List<Object>> mediaKeys(int i) {
    int start = i * blockSize;
    int end = start + blockSize;
    List<List<Object>> out = new ArrayList<>(1);
    for (MediaSpan m : media) {
      if (m.offset() >= end) {
        break;
      }
      if (m.end() > start) {
        out.add(List.of(m.identifier(), (long) (m.offset() - start)));
      }
    }
    return out;
  }

  /** The block's multimodal keys folded the way the router folds them ({@link MediaSpan#blockExtra}). */
  private long mediaExtra(int i) {
    return MediaSpan.blockExtra(java.util.Arrays.asList(media), i * blockSize, blockSize);
  }

  void appendToken(int token) {
    tokens[numTokens++] = token;
  }

  void addBlock(int block) {
    if (numBlocks == blocks.length) {
      blocks = Arrays.copyOf(blocks, blocks.length * 2);
    }
    blocks[numBlocks++] = block;
  }

  boolean isFinished() {
    return status == Status.FINISHED;
  }
}
