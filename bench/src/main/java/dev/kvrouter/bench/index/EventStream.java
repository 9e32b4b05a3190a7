package dev.kvrouter.bench.index;

import dev.kvrouter.index.wire.BlockRemoved;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.EventBatch;
import dev.kvrouter.index.wire.EventEncoder;
import dev.kvrouter.index.wire.KvEvent;
import dev.kvrouter.index.wire.WireLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * A cyclic, steady-state engine event stream for benchmarks: each batch stores {@code storesPerBatch} new
 * blocks (chained, several per event, as vLLM stores a request's newly full blocks) and removes the blocks
 * stored {@code window} batches earlier (tail first), so the index size stays constant and the cycle can repeat forever.
 */
final class EventStream {

  final byte[][] payloads;
  final EventBatch[] batches;
  final int blockEventsPerBatch;

  /**
   * @param cycle batches in one cycle (hashes repeat after it)
   * @param events BlockStored events per batch
   * @param blocksPerEvent blocks per BlockStored
   * @param window batches a block lives before its removal (must be < cycle); 0 means no removes
   */
  EventStream(long seed, int cycle, int events, int blocksPerEvent, int blockSize, int window, WireLayout layout) {
    SplittableRandom r = new SplittableRandom(seed);
    int perBatch = events * blocksPerEvent;
    long[][] hashes = new long[cycle][perBatch];
    for (long[] h : hashes) {
      for (int i = 0; i < perBatch; i++) {
        h[i] = r.nextLong();
      }
    }
    EventEncoder enc = new EventEncoder(layout);
    payloads = new byte[cycle][];
    batches = new EventBatch[cycle];
    for (int b = 0; b < cycle; b++) {
      List<KvEvent> evs = new ArrayList<>();
      for (int e = 0; e < events; e++) {
        long[] eh = new long[blocksPerEvent];
        System.arraycopy(hashes[b], e * blocksPerEvent, eh, 0, blocksPerEvent);
        int[] tokens = new int[blocksPerEvent * blockSize];
        for (int i = 0; i < tokens.length; i++) {
          tokens[i] = r.nextInt(150_000);
        }
        // first event of a batch starts a chain; the others continue it (parent = previous event's last block)
        Long parent = e == 0 ? null : hashes[b][e * blocksPerEvent - 1];
        evs.add(BlockStored.of(eh, parent, tokens, blockSize, "GPU"));
      }
      if (window > 0) {
        // tail first, as vLLM frees a request's blocks (head first would look like an engine that evicts parents
        // before their children, which the index's prefix-closure check flags)
        long[] old = hashes[Math.floorMod(b - window, cycle)];
        for (int i = old.length - 1; i >= 0; i--) {
          evs.add(BlockRemoved.of("GPU", old[i]));
        }
      }
      batches[b] = EventBatch.of(1.7e9 + b, 0, evs);
      payloads[b] = enc.encode(batches[b]);
    }
    blockEventsPerBatch = perBatch + (window > 0 ? perBatch : 0);
  }
}
