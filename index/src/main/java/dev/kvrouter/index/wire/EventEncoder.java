package dev.kvrouter.index.wire;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.Objects;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * Encodes event batches exactly as the engines' msgspec encoders do, in any {@link WireLayout}.
 *
 * <p>Integers use the smallest msgpack form (unsigned forms for non-negative values), floats are float64
 * and strings use str8 when they fit, which is msgspec's behaviour; the golden tests check that this class
 * reproduces msgspec's bytes. Used by {@link KvEventPublisher}, by tests and by the simulated workers.
 *
 * <p>Not thread-safe (reuses one packer).
 */
public final class EventEncoder {

  private final WireLayout layout;
  private final HashEncoding hashEncoding;
  private final MessageBufferPacker out = MessagePack.newDefaultBufferPacker();
  private final byte[] u64 = new byte[9];
  private final byte[] digest = new byte[32];

  public EventEncoder(WireLayout layout) {
    this(layout, HashEncoding.UNSIGNED);
  }

  public EventEncoder(WireLayout layout, HashEncoding hashEncoding) {
    this.layout = Objects.requireNonNull(layout, "layout");
    this.hashEncoding = Objects.requireNonNull(hashEncoding, "hashEncoding");
  }

  public WireLayout layout() {
    return layout;
  }

  /** The msgpack payload of one batch: {@code [ts, [events...], dp_rank]}. */
  public byte[] encode(EventBatch batch) {
    try {
      out.clear();
      out.packArrayHeader(3);
      out.packDouble(batch.ts());
      out.packArrayHeader(batch.events().size());
      for (KvEvent e : batch.events()) {
        event(e);
      }
      if (batch.dataParallelRank() == null) {
        out.packNil();
      } else {
        out.packInt(batch.dataParallelRank());
      }
      return out.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private void event(KvEvent e) throws IOException {
    if (e instanceof BlockStored s) {
      stored(s);
    } else if (e instanceof BlockRemoved r) {
      removed(r);
    } else {
      if (layout == WireLayout.VLLM_MAP) {
        out.packMapHeader(1);
        out.packString("type");
      } else {
        out.packArrayHeader(1);
      }
      out.packString(AllBlocksCleared.TAG);
    }
  }

  private void stored(BlockStored s) throws IOException {
    switch (layout) {
      case VLLM_ARRAY -> {
        out.packArrayHeader(12);
        out.packString(BlockStored.TAG);
        hashes(s.blockHashes());
        nullableHash(s.parentBlockHash());
        tokens(s.tokenIds());
        out.packInt(s.blockSize());
        nullableInt(s.loraId());
        nullableString(s.medium());
        nullableString(s.loraName());
        extraKeys(s.extraKeys());
        nullableInt(s.groupIdx());
        nullableString(s.kvCacheSpecKind());
        nullableInt(s.kvCacheSpecSlidingWindow());
      }
      case VLLM_MAP -> {
        int n = 8 + present(s.extraKeys()) + present(s.groupIdx()) + present(s.kvCacheSpecKind())
            + present(s.kvCacheSpecSlidingWindow()) + present(s.locality()) + present(s.ownership())
            + present(s.sessionId());
        out.packMapHeader(n);
        out.packString("type");
        out.packString(BlockStored.TAG);
        out.packString("block_hashes");
        hashes(s.blockHashes());
        out.packString("parent_block_hash");
        nullableHash(s.parentBlockHash());
        out.packString("token_ids");
        tokens(s.tokenIds());
        out.packString("block_size");
        out.packInt(s.blockSize());
        out.packString("lora_id");
        nullableInt(s.loraId());
        out.packString("medium");
        nullableString(s.medium());
        out.packString("lora_name");
        nullableString(s.loraName());
        if (s.extraKeys() != null) {
          out.packString("extra_keys");
          extraKeys(s.extraKeys());
        }
        optionalInt("group_idx", s.groupIdx());
        optionalString("kv_cache_spec_kind", s.kvCacheSpecKind());
        optionalInt("kv_cache_spec_sliding_window", s.kvCacheSpecSlidingWindow());
        optionalString("locality", s.locality());
        optionalString("ownership", s.ownership());
        optionalString("session_id", s.sessionId());
      }
      case SGLANG_ARRAY -> {
        out.packArrayHeader(s.cacheSalt() != null ? 8 : 7);
        out.packString(BlockStored.TAG);
        hashes(s.blockHashes());
        nullableHash(s.parentBlockHash());
        tokens(s.tokenIds());
        out.packInt(s.blockSize());
        nullableInt(s.loraId());
        nullableString(s.medium());
        if (s.cacheSalt() != null) {
          out.packMapHeader(1);
          out.packString("cache_salt");
          out.packString(s.cacheSalt());
        }
      }
      default -> throw new IllegalStateException(layout.name());
    }
  }

  private void removed(BlockRemoved r) throws IOException {
    switch (layout) {
      case VLLM_ARRAY -> {
        out.packArrayHeader(4);
        out.packString(BlockRemoved.TAG);
        hashes(r.blockHashes());
        nullableString(r.medium());
        nullableInt(r.groupIdx());
      }
      case VLLM_MAP -> {
        out.packMapHeader(3 + present(r.groupIdx()) + present(r.locality()) + present(r.ownership()));
        out.packString("type");
        out.packString(BlockRemoved.TAG);
        out.packString("block_hashes");
        hashes(r.blockHashes());
        out.packString("medium");
        nullableString(r.medium());
        optionalInt("group_idx", r.groupIdx());
        optionalString("locality", r.locality());
        optionalString("ownership", r.ownership());
      }
      case SGLANG_ARRAY -> {
        out.packArrayHeader(3);
        out.packString(BlockRemoved.TAG);
        hashes(r.blockHashes());
        nullableString(r.medium());
      }
      default -> throw new IllegalStateException(layout.name());
    }
  }

  private static int present(Object o) {
    return o == null ? 0 : 1;
  }

  private void optionalInt(String key, Integer v) throws IOException {
    if (v != null) {
      out.packString(key);
      out.packInt(v);
    }
  }

  private void optionalString(String key, String v) throws IOException {
    if (v != null) {
      out.packString(key);
      out.packString(v);
    }
  }

  private void hashes(long[] hashes) throws IOException {
    out.packArrayHeader(hashes.length);
    for (long h : hashes) {
      hash(h);
    }
  }

  private void nullableHash(Long h) throws IOException {
    if (h == null) {
      out.packNil();
    } else {
      hash(h);
    }
  }

  private void hash(long h) throws IOException {
    switch (hashEncoding) {
      case UNSIGNED -> {
        if (h >= 0) {
          out.packLong(h);
        } else {
          u64[0] = (byte) 0xcf;
          putBigEndian(u64, 1, h);
          out.writePayload(u64);
        }
      }
      case SIGNED -> out.packLong(h);
      case BYTES -> {
        for (int i = 0; i < 24; i++) {
          digest[i] = (byte) (h >>> ((i % 8) * 8) ^ (0x5A + i));
        }
        putBigEndian(digest, 24, h);
        out.packBinaryHeader(32);
        out.writePayload(digest);
      }
      default -> throw new IllegalStateException(hashEncoding.name());
    }
  }

  private void tokens(int[] tokens) throws IOException {
    if (tokens == null) {
      out.packArrayHeader(0);
      return;
    }
    out.packArrayHeader(tokens.length);
    for (int t : tokens) {
      out.packInt(t);
    }
  }

  private void nullableInt(Integer v) throws IOException {
    if (v == null) {
      out.packNil();
    } else {
      out.packInt(v);
    }
  }

  private void nullableString(String v) throws IOException {
    if (v == null) {
      out.packNil();
    } else {
      out.packString(v);
    }
  }

  private void extraKeys(List<List<Object>> keys) throws IOException {
    if (keys == null) {
      out.packNil();
      return;
    }
    out.packArrayHeader(keys.size());
    for (List<Object> k : keys) {
      generic(k);
    }
  }

  private void generic(Object o) throws IOException {
    if (o == null) {
      out.packNil();
    } else if (o instanceof String s) {
      out.packString(s);
    } else if (o instanceof Long l) {
      out.packLong(l);
    } else if (o instanceof Integer i) {
      out.packInt(i);
    } else if (o instanceof Double d) {
      out.packDouble(d);
    } else if (o instanceof Boolean b) {
      out.packBoolean(b);
    } else if (o instanceof byte[] b) {
      out.packBinaryHeader(b.length);
      out.writePayload(b);
    } else if (o instanceof List<?> list) {
      out.packArrayHeader(list.size());
      for (Object x : list) {
        generic(x);
      }
    } else {
      throw new IllegalArgumentException("cannot encode extra key item of type " + o.getClass().getName());
    }
  }

  private static void putBigEndian(byte[] b, int off, long v) {
    for (int i = 7; i >= 0; i--) {
      b[off + i] = (byte) v;
      v >>>= 8;
    }
  }
}
