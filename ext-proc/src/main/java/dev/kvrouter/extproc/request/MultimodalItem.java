package dev.kvrouter.extproc.request;

import java.util.Objects;

/**
 * One media item of a chat prompt (an image, an audio clip, a video), in the identity vLLM gives it in block
 * hashes: per block, vLLM adds {@code (identifier, item_offset - block_start)} for every item whose placeholder
 * tokens overlap the block. The identifier is the client's {@code uuid} when the part carries one; otherwise the
 * router uses a stable hash of the item's content ({@code kvr1-mm:<modality>:<16 hex>}, XXH3-64 of the payload's
 * UTF-8 bytes: the URL, or the base64 data), so repeats of the same
 * image match each other in the router's own predictions but never an engine's event (vLLM hashes the decoded
 * media, which the router does not fetch). Where the placeholder tokens sit is only known after templating and
 * tokenization: see {@link MultimodalPlacement} and {@link MultimodalBlockKeys}.
 *
 * @param index position among the prompt's media items (0-based, in order of appearance)
 * @param modality image, audio or video
 * @param identifier the client's uuid, or the content hash form above
 * @param clientUuid true when {@code identifier} is the client's uuid (only then can it match engine events)
 * @param message index of the message in {@code messages}
 * @param part index of the content part in that message
 */
public record MultimodalItem(int index, Modality modality, String identifier, boolean clientUuid, int message,
    int part) {

  /** Prefix of identifiers the router derives itself. */
  public static final String DERIVED_PREFIX = "kvr1-mm:";

  public enum Modality {
    IMAGE,
    AUDIO,
    VIDEO;

    public String key() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  public MultimodalItem {
    Objects.requireNonNull(modality, "modality");
    Objects.requireNonNull(identifier, "identifier");
  }
}
