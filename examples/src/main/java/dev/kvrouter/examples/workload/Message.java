package dev.kvrouter.examples.workload;

import java.util.List;
import java.util.Objects;

/**
 * One part of a prompt: a chat message ({@code role} set) or, in a token prompt, a run of segments with
 * {@code role == null}.
 */
public record Message(String role, List<Segment> segments) {

  public Message {
    segments = List.copyOf(Objects.requireNonNull(segments, "segments"));
  }

  public static Message of(String role, Segment... segments) {
    return new Message(role, List.of(segments));
  }

  public int length() {
    int n = 0;
    for (Segment s : segments) {
      n += s.length();
    }
    return n;
  }
}
