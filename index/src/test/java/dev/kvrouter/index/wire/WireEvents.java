package dev.kvrouter.index.wire;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

/** Test data builders for wire events. */
final class WireEvents {

  private WireEvents() {}

  static int[] tokens(int n, int start) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = start + i;
    }
    return t;
  }

  /** A random event with every field the layout can carry set to something (nulls included at random). */
  static KvEvent random(SplittableRandom r, WireLayout layout) {
    int kind = r.nextInt(10);
    if (kind == 0) {
      return AllBlocksCleared.INSTANCE;
    }
    if (kind <= 3) {
      long[] hashes = hashes(r, 1 + r.nextInt(3));
      String medium = r.nextBoolean() ? "GPU" : r.nextBoolean() ? "CPU" : null;
      return switch (layout) {
        case VLLM_ARRAY -> new BlockRemoved(hashes, medium, r.nextBoolean() ? r.nextInt(3) : null, null, null);
        case VLLM_MAP -> new BlockRemoved(hashes, medium, r.nextBoolean() ? r.nextInt(3) : null,
            r.nextBoolean() ? "LOCAL" : null, r.nextBoolean() ? "owner-1" : null);
        case SGLANG_ARRAY -> new BlockRemoved(hashes, medium, null, null, null);
      };
    }
    int blocks = 1 + r.nextInt(4);
    int bs = 1 << (1 + r.nextInt(5));
    long[] hashes = hashes(r, blocks);
    Long parent = r.nextBoolean() ? r.nextLong() : null;
    int[] tokens = new int[blocks * bs];
    for (int i = 0; i < tokens.length; i++) {
      tokens[i] = r.nextInt(200_000);
    }
    String medium = r.nextBoolean() ? "GPU" : null;
    Integer loraId = r.nextInt(4) == 0 ? r.nextInt(100) : null;
    if (layout == WireLayout.SGLANG_ARRAY) {
      String salt = r.nextBoolean() ? "kvr1:tenant-" + r.nextInt(9) : null;
      return new BlockStored(hashes, parent, tokens, bs, loraId, medium, null, null, null, null, null, null, null,
          null, salt);
    }
    String lora = r.nextInt(3) == 0 ? "adapter-" + r.nextInt(5) : null;
    List<List<Object>> extra = null;
    if (r.nextBoolean()) {
      extra = new ArrayList<>();
      for (int b = 0; b < blocks; b++) {
        if (r.nextBoolean()) {
          extra.add(null);
        } else {
          List<Object> items = new ArrayList<>();
          if (lora != null) {
            items.add(lora);
          }
          items.add(Arrays.asList((Object) ("mm-" + r.nextInt(100)), (long) r.nextInt(64) - 32));
          if (r.nextInt(4) == 0) {
            items.add(new byte[] {1, 2, (byte) r.nextInt(256)});
          }
          if (b == 0 && r.nextBoolean()) {
            items.add("kvr1:salt-" + r.nextInt(9));
          }
          extra.add(items);
        }
      }
    }
    Integer group = r.nextBoolean() ? r.nextInt(3) : null;
    String kind2 = r.nextBoolean() ? "full_attention" : null;
    Integer window = r.nextInt(4) == 0 ? 4096 : null;
    if (layout == WireLayout.VLLM_ARRAY) {
      return new BlockStored(hashes, parent, tokens, bs, loraId, medium, lora, extra, group, kind2, window, null, null,
          null, null);
    }
    return new BlockStored(hashes, parent, tokens, bs, loraId, medium, lora, extra, group, kind2, window,
        r.nextBoolean() ? "LOCAL" : null, r.nextBoolean() ? "owner" : null, r.nextBoolean() ? "sess-1" : null, null);
  }

  static long[] hashes(SplittableRandom r, int n) {
    long[] h = new long[n];
    for (int i = 0; i < n; i++) {
      // mix of small, upper-half (uint64 on the wire) and ordinary values
      h[i] = switch (r.nextInt(3)) {
        case 0 -> r.nextInt(1000);
        case 1 -> r.nextLong() | Long.MIN_VALUE;
        default -> r.nextLong();
      };
    }
    return h;
  }
}
