package dev.kvrouter.index.wire;

/** The event layouts engines have shipped; the decoder reads all of them, the encoder writes any one. */
public enum WireLayout {
  /**
   * vLLM up to 0.23: {@code array_like} tagged structs, element 0 is the class name, every declared field
   * present in declaration order (BlockStored through {@code kv_cache_spec_sliding_window}).
   */
  VLLM_ARRAY,
  /**
   * vLLM since PR #42892 (0.24+): tagged maps, {@code "type"} first, then the fields in declaration order with
   * defaulted fields omitted when they hold their default ({@code omit_defaults=True}).
   */
  VLLM_MAP,
  /**
   * SGLang (array era): {@code BlockStored(block_hashes, parent_block_hash, token_ids, block_size, lora_id,
   * medium)}, plus a trailing {@code {"cache_salt": ...}} metadata map for salted blocks;
   * {@code BlockRemoved(block_hashes, medium)}.
   */
  SGLANG_ARRAY
}
