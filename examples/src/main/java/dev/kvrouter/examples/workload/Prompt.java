package dev.kvrouter.examples.workload;

import java.util.List;
import java.util.Objects;

/**
 * What a request sends, as segments: {@link Format#TOKENS} prompts go to {@code /v1/completions} as token ids
 * (the concatenation of every segment); {@link Format#CHAT} prompts go to {@code /v1/chat/completions} as
 * messages whose text is rendered from their segments ({@link ChatText}).
 */
public record Prompt(Format format, List<Message> messages) {

  /** How the prompt is sent. */
  public enum Format {
    TOKENS,
    CHAT;

    public static Format parse(String s) {
      return switch (s.trim().toLowerCase(java.util.Locale.ROOT)) {
        case "tokens", "completions" -> TOKENS;
        case "chat" -> CHAT;
        default -> throw new IllegalArgumentException("format must be tokens or chat, was " + s);
      };
    }
  }

  public Prompt {
    Objects.requireNonNull(format, "format");
    messages = List.copyOf(messages);
    if (messages.isEmpty()) {
      throw new IllegalArgumentException("a prompt needs at least one message");
    }
  }

  public static Prompt tokens(List<Segment> segments) {
    return new Prompt(Format.TOKENS, List.of(new Message(null, segments)));
  }

  public static Prompt chat(List<Message> messages) {
    for (Message m : messages) {
      Objects.requireNonNull(m.role(), "chat messages need a role");
    }
    return new Prompt(Format.CHAT, messages);
  }

  /** Content tokens: exact for token prompts; for chat, the segment tokens before any template is applied. */
  public int contentLength() {
    int n = 0;
    for (Message m : messages) {
      n += m.length();
    }
    return n;
  }
}
