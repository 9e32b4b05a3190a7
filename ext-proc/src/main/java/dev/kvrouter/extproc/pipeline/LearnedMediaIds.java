package dev.kvrouter.extproc.pipeline;

import dev.kvrouter.extproc.request.MultimodalItem;
import dev.kvrouter.extproc.request.MultimodalPlacement;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.index.WorkerId;
import java.util.ArrayList;
import java.util.List;

/**
 * A media request's items as the engine names them, as far as the router knows: the client's uuid, else the
 * engine identifier learned from KV events ({@link dev.kvrouter.index.media.MediaIdentities}), else the router's
 * own {@code kvr1-mm:} identifier. Items with a uuid cost nothing here; the others one lookup each.
 *
 * <p>The first item still unresolved is the one the chosen worker's events can teach: the blocks before it hold
 * only text and resolved items, so our hash of its first block's parent is the engine's parent too. Later
 * unresolved items follow it in the chain, so their parents differ in the two hash spaces; they are learned on
 * later requests, one item further each time.
 *
 * @param placements the placements with learned identifiers substituted (same order)
 * @param unresolved the first placement (lowest offset) still carrying the router's identifier, or null
 */
record LearnedMediaIds(List<MultimodalPlacement> placements, MultimodalPlacement unresolved) {

  static LearnedMediaIds resolve(List<MultimodalPlacement> placements, long namespace, PrefixOverlapSource overlaps) {
    List<MultimodalPlacement> out = null;
    MultimodalPlacement unresolved = null;
    for (int i = 0; i < placements.size(); i++) {
      MultimodalPlacement p = placements.get(i);
      MultimodalItem item = p.item();
      if (item.clientUuid()) {
        continue;
      }
      String engine = overlaps.learnedMediaId(namespace, item.identifier());
      if (engine == null) {
        if (unresolved == null || p.offset() < unresolved.offset()) {
          unresolved = p;
        }
        continue;
      }
      if (out == null) {
        out = new ArrayList<>(placements);
      }
      out.set(i, new MultimodalPlacement(new MultimodalItem(item.index(), item.modality(), engine, false,
          item.message(), item.part()), p.offset(), p.length()));
    }
    return new LearnedMediaIds(out == null ? placements : out, unresolved);
  }

  /**
   * Tells {@code overlaps} that {@code chosen} is about to store the first unresolved item, keyed by our hash of
   * the block before its first block; nothing if every item is resolved or that block is not full.
   *
   * @param hashes the request's block chain, hashed with {@link #placements}
   */
  void expect(PrefixOverlapSource overlaps, WorkerId chosen, long root, long[] hashes, int blockSize) {
    if (unresolved == null) {
      return;
    }
    int block = unresolved.offset() / blockSize;
    if (block >= hashes.length) {
      return; // the item's first block never fills: the engine stores nothing to learn from
    }
    long parent = block == 0 ? root : hashes[block - 1];
    overlaps.expectMedia(chosen, parent, unresolved.offset() - block * blockSize, root,
        unresolved.item().identifier());
  }
}
