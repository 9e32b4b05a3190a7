package dev.kvrouter.examples.sim.engine;

import java.util.Objects;

/**
 * Where one media item sits in a request's prompt, as vLLM's {@code mm_position} with its {@code identifier}: the
 * prompt tokens {@code [offset, offset + length)} hold the item's placeholder sequence. Every block overlapping
 * that range carries {@code [identifier, offset - block_start]} in its hash's extra keys.
 *
 * @param identifier the client's {@code uuid}, or the engine's own hash of the media content
 * @param offset first prompt token of the item
 * @param length tokens of the item's sequence (vLLM's position length, which a token merge may not shorten)
 */
public record MediaSpan(String identifier, int offset, int length) {

  public MediaSpan {
    Objects.requireNonNull(identifier, "identifier");
    if (offset < 0 || length <= 0) {
      throw new IllegalArgumentException("media span needs offset >= 0 and length > 0, was " + offset + "/" + length);
    }
  }

  public int end() {
    return offset + length;
  }
}
