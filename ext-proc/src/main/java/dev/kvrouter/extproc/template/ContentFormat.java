package dev.kvrouter.extproc.template;

import dev.kvrouter.extproc.template.jinja.TemplateAnalysis;

/**
 * How vLLM hands message content to a chat template ({@code --chat-template-content-format}):
 * {@link #STRING} joins the text parts of a content array with newlines; {@link #OPENAI} keeps
 * every message's content as a list of parts ({@code {"type": "text", "text": ...}}).
 */
public enum ContentFormat {
  STRING,
  OPENAI;

  /** vLLM's automatic detection from the template's syntax tree. */
  public static ContentFormat detect(ChatTemplate template) {
    return TemplateAnalysis.detectContentFormat(template.compiled()).equals("openai") ? OPENAI : STRING;
  }

  /** Parses vLLM's option value: "auto" detects, "string" and "openai" force. */
  public static ContentFormat resolve(String option, ChatTemplate template) {
    return switch (option == null ? "auto" : option) {
      case "auto" -> detect(template);
      case "string" -> STRING;
      case "openai" -> OPENAI;
      default -> throw new IllegalArgumentException("chat template content format must be auto, string or openai");
    };
  }
}
