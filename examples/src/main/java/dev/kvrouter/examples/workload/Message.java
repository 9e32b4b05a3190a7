package dev.kvrouter.examples.workload;

import java.util.List;
import java.util.Objects;

/**
 * One part of a prompt: a chat message ({@code role} set) or, in a token prompt, a run of segments with
 * {@code role == null}. A chat message may carry images: they come first in its content, then its text.
 */
public record Message(String role, List<ImagePart> images, List<Segment> segments) {

  public Message {
    images = images == null ? List.of() : List.copyOf(images);
    segments = List.copyOf(Objects.requireNonNull(segments, "segments"));
  }

  /** A text-only message. */
  public Message(String role, List<Segment> segments) {
    this(role, List.of(), segments);
  }

  public static Message of(String role, Segment... segments) {
    return new Message(role, List.of(segments));
  }

  /** Text tokens (segments); images not counted. */
  public int length() {
    int n = 0;
    for (Segment s : segments) {
      n += s.length();
    }
    return n;
  }
}
