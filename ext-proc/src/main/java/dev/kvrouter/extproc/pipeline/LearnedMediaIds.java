package dev.kvrouter.extproc.pipeline;

import dev.kvrouter.extproc.request.MultimodalItem;
import dev.kvrouter.extproc.request.MultimodalPlacement;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.media.MediaIdentities;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * A media request's items as the engine names them, as far as the router knows: the client's uuid, else the
 * engine identifier learned from KV events ({@link dev.kvrouter.index.media.MediaIdentities}), else the router's
 * own {@code kvr1-mm:} identifier. Items with a uuid cost nothing here; the others one lookup each.
 *
 * <p>The first item still unresolved is the one the chosen worker's events can be awaited at: the blocks before
 * it hold only text and resolved items, so our hash of its first block's parent is the engine's parent too. Later
 * unresolved items follow it in the chain, so their parents differ in the two hash spaces; they go along as
 * follow-ups (their block distance from the first one), read from the same store once it named the first.
 *
 * @param placements the placements with learned identifiers substituted (same order)
 * @param unresolved the placements still carrying the router's identifier, by offset
 */
record LearnedMediaIds(List<MultimodalPlacement> placements, List<MultimodalPlacement> unresolved) {

  /** The first item still unresolved, or null. */
  MultimodalPlacement firstUnresolved() {
    return unresolved.isEmpty() ? null : unresolved.get(0);
  }

  static LearnedMediaIds resolve(List<MultimodalPlacement> placements, long namespace, PrefixOverlapSource overlaps) {
    List<MultimodalPlacement> out = null;
    List<MultimodalPlacement> unresolved = List.of();
    for (int i = 0; i < placements.size(); i++) {
      MultimodalPlacement p = placements.get(i);
      MultimodalItem item = p.item();
      if (item.clientUuid()) {
        continue;
      }
      String engine = overlaps.learnedMediaId(namespace, item.identifier());
      if (engine == null) {
        if (unresolved.isEmpty()) {
          unresolved = new ArrayList<>(2);
        }
        unresolved.add(p);
        continue;
      }
      if (out == null) {
        out = new ArrayList<>(placements);
      }
      out.set(i, new MultimodalPlacement(new MultimodalItem(item.index(), item.modality(), engine, false,
          item.message(), item.part()), p.offset(), p.length()));
    }
    if (unresolved.size() > 1) {
      unresolved.sort(Comparator.comparingInt(MultimodalPlacement::offset));
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
    MultimodalPlacement first = firstUnresolved();
    if (first == null) {
      return;
    }
    int block = first.offset() / blockSize;
    if (block >= hashes.length) {
      return; // the item's first block never fills: the engine stores nothing to learn from
    }
    List<MediaIdentities.FollowUp> rest = new ArrayList<>(unresolved.size() - 1);
    for (int i = 1; i < unresolved.size(); i++) {
      MultimodalPlacement p = unresolved.get(i);
      int b = p.offset() / blockSize;
      if (b < hashes.length) {
        rest.add(new MediaIdentities.FollowUp(b - block, p.offset() - b * blockSize, p.item().identifier()));
      }
    }
    long parent = block == 0 ? root : hashes[block - 1];
    overlaps.expectMedia(chosen, parent, first.offset() - block * blockSize, root, first.item().identifier(), rest);
  }
}
