package dev.kvrouter.examples.workload;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * What a request sends, as segments: {@link Format#TOKENS} prompts go to {@code /v1/completions} as token ids
 * (the concatenation of every segment); {@link Format#CHAT} prompts go to {@code /v1/chat/completions} as
 * messages whose text is rendered from their segments ({@link ChatText}); {@link Format#MESSAGES} prompts go to
 * Anthropic's {@code /v1/messages} as a coding agent sends them ({@link AgentTools}).
 */
public record Prompt(Format format, List<Message> messages) {

  /** How the prompt is sent. */
  public enum Format {
    TOKENS,
    CHAT,
    MESSAGES;

    public static Format parse(String s) {
      return switch (s.trim().toLowerCase(java.util.Locale.ROOT)) {
        case "tokens", "completions" -> TOKENS;
        case "chat" -> CHAT;
        case "messages" -> MESSAGES;
        default -> throw new IllegalArgumentException("format must be tokens, chat or messages, was " + s);
      };
    }

    /** Text the engine renders with the model's chat template (both chat APIs), not token ids. */
    public boolean templated() {
      return this != TOKENS;
    }
  }

  public Prompt {
    Objects.requireNonNull(format, "format");
    messages = List.copyOf(messages);
    if (messages.isEmpty()) {
      throw new IllegalArgumentException("a prompt needs at least one message");
    }
    if (format == Format.TOKENS && messages.stream().anyMatch(m -> !m.images().isEmpty())) {
      throw new IllegalArgumentException("images need a chat prompt");
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

  /**
   * An Anthropic Messages prompt ({@link AgentTools#writeBody} says how the roles become blocks): a leading system
   * message is the top-level {@code system}, a {@code tool} message the tool result opening the next user message.
   */
  public static Prompt anthropic(List<Message> messages) {
    for (Message m : messages) {
      Objects.requireNonNull(m.role(), "messages need a role");
    }
    return new Prompt(Format.MESSAGES, messages);
  }

  /**
   * This prompt as a client resends it when some earlier answers arrived shorter than scripted: every segment
   * named in {@code received} (by seed, the scripted answers of earlier turns) is cut to the tokens received, 0 for
   * a turn that failed before its first token. A shorter segment with the same seed is a prefix of the scripted
   * one ({@link Segment}), so the history holds exactly what the engine streamed. Returns {@code this} when nothing
   * is cut.
   */
  public Prompt withAnswersCut(Map<Long, Integer> received) {
    if (received.isEmpty()) {
      return this;
    }
    boolean changed = false;
    List<Message> out = new ArrayList<>(messages.size());
    for (Message m : messages) {
      List<Segment> segs = new ArrayList<>(m.segments().size());
      for (Segment s : m.segments()) {
        Integer got = received.get(s.seed());
        if (got != null && got < s.length()) {
          segs.add(new Segment(s.seed(), Math.max(0, got)));
          changed = true;
        } else {
          segs.add(s);
        }
      }
      out.add(new Message(m.role(), m.images(), segs));
    }
    return changed ? new Prompt(format, out) : this;
  }

  /** Images over all messages. */
  public int imageCount() {
    int n = 0;
    for (Message m : messages) {
      n += m.images().size();
    }
    return n;
  }

  /**
   * Content tokens: exact for token prompts; for chat, the segment tokens before any template is applied (images
   * not counted).
   */
  public int contentLength() {
    int n = 0;
    for (Message m : messages) {
      n += m.length();
    }
    return n;
  }
}
