package dev.kvrouter.index.events;

import dev.kvrouter.index.Tier;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import dev.kvrouter.index.wire.AllBlocksCleared;
import dev.kvrouter.index.wire.BlockRemoved;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.KvEvent;
import dev.kvrouter.index.wire.WireLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;

/**
 * A trivially correct engine for tests: a prefix cache with GPU and CPU tiers whose true content is known,
 * emitting the events vLLM (or SGLang) would send for each change. The router's identity of each block is
 * computed here from the block's tokens and namespace, the way the request path would.
 */
final class SimEngine {

  private record Block(long engine, long ours, long parentEngine, boolean root, int[] tokens, String lora,
      String salt) {}

  final WorkerId id;
  final String model;
  final int blockSize;
  private final WireLayout layout;
  private final SplittableRandom r;
  private final Map<Long, Block> known = new HashMap<>();
  /** Per tier (GPU, CPU): engine hash to stored count (vLLM does not de-duplicate). */
  private final List<Map<Long, Integer>> tiers = List.of(new HashMap<>(), new HashMap<>());
  /** Every identity this engine ever stored, for the final comparison. */
  final Set<Long> everStored = new HashSet<>();

  SimEngine(WorkerId id, String model, int blockSize, WireLayout layout, long seed) {
    this.id = id;
    this.model = model;
    this.blockSize = blockSize;
    this.layout = layout;
    this.r = new SplittableRandom(seed);
  }

  /** The events of one engine step (one batch), applied to the true state. */
  List<KvEvent> step() {
    List<KvEvent> out = new ArrayList<>();
    int n = 1 + r.nextInt(3);
    for (int k = 0; k < n; k++) {
      int op = r.nextInt(100);
      if (op < 45 || held().isEmpty()) {
        out.add(storeChain());
      } else if (op < 52) {
        out.add(duplicateStore());
      } else if (op < 62) {
        KvEvent e = offload();
        if (e != null) {
          out.add(e);
        }
      } else if (op < 99) {
        KvEvent e = remove();
        if (e != null) {
          out.add(e);
        }
      } else {
        tiers.forEach(Map::clear);
        out.add(AllBlocksCleared.INSTANCE);
      }
    }
    return out;
  }

  /** The engine restarted: its cache is empty. */
  void restart() {
    tiers.forEach(Map::clear);
  }

  /** The true best tier of {@code ours} on this engine, or null if not held. */
  Tier trueTier(long ours) {
    Tier best = null;
    for (Block b : known.values()) {
      if (b.ours() != ours) {
        continue;
      }
      if (tiers.get(0).containsKey(b.engine())) {
        return Tier.GPU;
      }
      if (tiers.get(1).containsKey(b.engine())) {
        best = Tier.CPU;
      }
    }
    return best;
  }

  /** Distinct blocks held in any tier (= the view's handle count when in sync). */
  int heldCount() {
    return held().size();
  }

  private Set<Long> held() {
    Set<Long> s = new HashSet<>(tiers.get(0).keySet());
    s.addAll(tiers.get(1).keySet());
    return s;
  }

  private long freshEngineHash() {
    long h;
    do {
      h = r.nextInt(4) == 0 ? r.nextLong() | Long.MIN_VALUE : r.nextLong();
    } while (known.containsKey(h) || h == 0);
    return h;
  }

  private KvEvent storeChain() {
    List<Long> gpu = new ArrayList<>(tiers.get(0).keySet());
    Block parent = gpu.isEmpty() || r.nextInt(3) == 0 ? null : known.get(gpu.get(r.nextInt(gpu.size())));
    int blocks = 1 + r.nextInt(4);
    String lora = parent != null ? parent.lora() : (layout != WireLayout.SGLANG_ARRAY && r.nextInt(4) == 0
        ? "adapter-" + r.nextInt(2) : null);
    String salt = parent != null ? parent.salt() : (r.nextInt(3) == 0 ? "kvr1:tenant-" + r.nextInt(3) : null);
    long prevOurs = parent != null ? parent.ours() : new CacheNamespace(model, lora, salt).rootSeed();
    long[] engine = new long[blocks];
    int[] tokens = new int[blocks * blockSize];
    List<List<Object>> extra = new ArrayList<>();
    for (int b = 0; b < blocks; b++) {
      int[] t = new int[blockSize];
      for (int i = 0; i < blockSize; i++) {
        t[i] = r.nextInt(150_000);
      }
      System.arraycopy(t, 0, tokens, b * blockSize, blockSize);
      long ours = BlockHasher.blockHash(prevOurs, t, 0, blockSize, 0);
      engine[b] = freshEngineHash();
      known.put(engine[b], new Block(engine[b], ours, b == 0 ? (parent == null ? 0 : parent.engine())
          : engine[b - 1], parent == null && b == 0, t, lora, salt));
      tiers.get(0).merge(engine[b], 1, Integer::sum);
      everStored.add(ours);
      prevOurs = ours;
      List<Object> items = new ArrayList<>();
      if (lora != null) {
        items.add(lora);
      }
      if (parent == null && b == 0 && salt != null) {
        items.add(salt);
      }
      extra.add(items.isEmpty() ? null : items);
    }
    Long parentHash = parent == null ? null : parent.engine();
    BlockStored s = BlockStored.of(engine, parentHash, tokens, blockSize, "GPU");
    if (layout == WireLayout.SGLANG_ARRAY) {
      return parent == null && salt != null ? s.withCacheSalt(salt) : s;
    }
    return s.withLora(lora, extra);
  }

  /** Re-stores a held GPU block exactly as before (same hash, same parent, same tokens). */
  private KvEvent duplicateStore() {
    List<Long> gpu = new ArrayList<>(tiers.get(0).keySet());
    if (gpu.isEmpty()) {
      return storeChain();
    }
    Block b = known.get(gpu.get(r.nextInt(gpu.size())));
    Long parent = b.root() ? null : b.parentEngine();
    if (parent != null && !held().contains(parent)) {
      return storeChain(); // vLLM would not store a block whose parent is gone; nor do we
    }
    tiers.get(0).merge(b.engine(), 1, Integer::sum);
    BlockStored s = BlockStored.of(new long[] {b.engine()}, parent, b.tokens(), blockSize, "GPU");
    if (layout == WireLayout.SGLANG_ARRAY) {
      return b.root() && b.salt() != null ? s.withCacheSalt(b.salt()) : s;
    }
    List<List<Object>> extra = new ArrayList<>();
    List<Object> items = new ArrayList<>();
    if (b.lora() != null) {
      items.add(b.lora());
    }
    if (b.root() && b.salt() != null) {
      items.add(b.salt());
    }
    extra.add(items.isEmpty() ? null : items);
    return s.withLora(b.lora(), extra);
  }

  /** Copies a GPU block to CPU, reported without tokens as older offload connectors do. */
  private KvEvent offload() {
    List<Long> gpu = new ArrayList<>(tiers.get(0).keySet());
    if (gpu.isEmpty()) {
      return null;
    }
    long e = gpu.get(r.nextInt(gpu.size()));
    tiers.get(1).merge(e, 1, Integer::sum);
    return new BlockStored(new long[] {e}, null, new int[0], 0, null, "CPU", null, null, null, null, null, null,
        null, null, null);
  }

  private KvEvent remove() {
    int tier = r.nextInt(4) == 0 ? 1 : 0;
    List<Long> in = new ArrayList<>(tiers.get(tier).keySet());
    if (in.isEmpty()) {
      return null;
    }
    long e = in.get(r.nextInt(in.size()));
    tiers.get(tier).compute(e, (k, c) -> c == 1 ? null : c - 1);
    return BlockRemoved.of(tier == 0 ? "GPU" : "CPU", e);
  }
}
