package dev.kvrouter.examples.workload;

import java.util.List;

/**
 * A rendered chat message, ready for an OpenAI {@code messages} array: text only (a string {@code content}) or, with
 * images, a content-part array of the images ({@code image_url}) followed by the text.
 *
 * @param reasoning an assistant message's thinking, resent as the {@code reasoning} vLLM's chat answer carried it in
 *     (its reasoning parser's output), or null
 */
public record ChatMessage(String role, List<ImagePart> images, String content, String reasoning) {

  public ChatMessage {
    images = images == null ? List.of() : List.copyOf(images);
  }

  /** A message without reasoning. */
  public ChatMessage(String role, List<ImagePart> images, String content) {
    this(role, images, content, null);
  }
}
