package dev.kvrouter.examples.workload;

import dev.kvrouter.examples.sim.engine.MediaSpan;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;

/**
 * A prompt as an engine prefills it: token ids, and the media items among them by position (empty for text).
 */
public record PromptIds(int[] tokens, List<MediaSpan> media) {

  public PromptIds {
    Objects.requireNonNull(tokens, "tokens");
    media = media == null || media.isEmpty() ? List.of()
        : media.stream().sorted(Comparator.comparingInt(MediaSpan::offset)).toList();
    if (!media.isEmpty() && media.get(media.size() - 1).end() > tokens.length) {
      throw new IllegalArgumentException("a media item ends after the prompt");
    }
  }

  public static PromptIds text(int[] tokens) {
    return new PromptIds(tokens, List.of());
  }
}
