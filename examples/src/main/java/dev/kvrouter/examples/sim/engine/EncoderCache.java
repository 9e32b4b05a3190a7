package dev.kvrouter.examples.sim.engine;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * vLLM's encoder cache, as far as it saves work: vision-encoder outputs by media identifier, charged by the item's
 * tokens, kept after their request is done and evicted least recently used when a new output needs room. An item
 * found here is not encoded again, even behind a different prefix. Simplification: vLLM never evicts an output a
 * running request still needs; here the entry is dropped even then, which only matters if more images than fit in
 * one step's budget were in flight on one worker at once (the request that needs it was encoded already). Owned by
 * the engine thread.
 */
final class EncoderCache {

  private final int capacityTokens;
  private final LinkedHashMap<String, Integer> entries = new LinkedHashMap<>(64, 0.75f, true);
  private int usedTokens;

  /** @param capacityTokens vLLM's {@code encoder_cache_size}; 0 keeps nothing */
  EncoderCache(int capacityTokens) {
    if (capacityTokens < 0) {
      throw new IllegalArgumentException("encoder cache capacity must be >= 0, was " + capacityTokens);
    }
    this.capacityTokens = capacityTokens;
  }

  /** Whether {@code id}'s output is cached; a hit makes it the most recently used. */
  boolean hit(String id) {
    return entries.get(id) != null;
  }

  /** Records a freshly encoded output of {@code tokens} tokens, evicting the least recently used as needed. */
  void put(String id, int tokens) {
    if (tokens > capacityTokens) {
      return;
    }
    Integer old = entries.remove(id);
    if (old != null) {
      usedTokens -= old;
    }
    Iterator<Map.Entry<String, Integer>> it = entries.entrySet().iterator();
    while (usedTokens + tokens > capacityTokens && it.hasNext()) {
      usedTokens -= it.next().getValue();
      it.remove();
    }
    entries.put(id, tokens);
    usedTokens += tokens;
  }
}
