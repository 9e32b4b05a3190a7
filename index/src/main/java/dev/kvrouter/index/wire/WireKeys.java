package dev.kvrouter.index.wire;

import java.nio.charset.StandardCharsets;

/**
 * The event tags and map keys both readers recognise ({@link EventDecoder}, {@link FastEventReader}), as UTF-8
 * bytes; a key's code is its index in {@link #KEYS}.
 */
final class WireKeys {

  static final byte[] T_STORED = bytes(BlockStored.TAG);
  static final byte[] T_REMOVED = bytes(BlockRemoved.TAG);
  static final byte[] T_CLEARED = bytes(AllBlocksCleared.TAG);

  static final int K_TYPE = 0;
  static final int K_HASHES = 1;
  static final int K_PARENT = 2;
  static final int K_TOKENS = 3;
  static final int K_BLOCK_SIZE = 4;
  static final int K_LORA_ID = 5;
  static final int K_MEDIUM = 6;
  static final int K_LORA_NAME = 7;
  static final int K_EXTRA = 8;
  static final int K_GROUP = 9;
  static final int K_KIND = 10;
  static final int K_WINDOW = 11;
  static final int K_LOCALITY = 12;
  static final int K_OWNERSHIP = 13;
  static final int K_SESSION = 14;
  static final int K_SALT = 15;
  static final int K_METADATA = 16;
  static final int K_TS = 17;
  static final int K_EVENTS = 18;
  static final int K_DP = 19;
  static final int K_ATTN_DP = 20;

  static final byte[][] KEYS = {
    bytes("type"), bytes("block_hashes"), bytes("parent_block_hash"), bytes("token_ids"), bytes("block_size"),
    bytes("lora_id"), bytes("medium"), bytes("lora_name"), bytes("extra_keys"), bytes("group_idx"),
    bytes("kv_cache_spec_kind"), bytes("kv_cache_spec_sliding_window"), bytes("locality"), bytes("ownership"),
    bytes("session_id"), bytes("cache_salt"), bytes("metadata"), bytes("ts"), bytes("events"),
    bytes("data_parallel_rank"), bytes("attn_dp_rank")
  };

  private WireKeys() {}

  static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
