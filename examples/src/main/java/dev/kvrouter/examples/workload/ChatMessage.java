package dev.kvrouter.examples.workload;

import java.util.List;

/**
 * A rendered chat message, ready for an OpenAI {@code messages} array: text only (a string {@code content}) or, with
 * images, a content-part array of the images ({@code image_url}) followed by the text.
 */
public record ChatMessage(String role, List<ImagePart> images, String content) {

  public ChatMessage {
    images = images == null ? List.of() : List.copyOf(images);
  }
}
