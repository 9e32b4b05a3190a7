package dev.kvrouter.extproc.template;

import java.util.List;
import java.util.Map;

/**
 * The arguments of {@code tokenizer.apply_chat_template(conversation, tools=..., documents=...,
 * add_generation_prompt=..., continue_final_message=..., tokenize=False, **kwargs)}, as plain Java
 * values (what Jackson produces from request JSON).
 *
 * @param messages the conversation: one map per message
 * @param tools JSON-schema tool dicts, or null
 * @param documents RAG documents, or null
 * @param addGenerationPrompt append the assistant header
 * @param continueFinalMessage null when off; otherwise the field of the final message to leave
 *     open ({@code "content"} is what {@code continue_final_message=True} means)
 * @param kwargs extra template variables ({@code enable_thinking}, ...); they override special tokens
 */
public record ChatTemplateInput(
    List<? extends Map<String, ?>> messages,
    List<? extends Map<String, ?>> tools,
    List<? extends Map<String, ?>> documents,
    boolean addGenerationPrompt,
    String continueFinalMessage,
    Map<String, ?> kwargs) {

  public ChatTemplateInput {
    kwargs = kwargs == null ? Map.of() : kwargs;
  }

  /** Messages only, with the generation prompt. */
  public static ChatTemplateInput of(List<? extends Map<String, ?>> messages) {
    return new ChatTemplateInput(messages, null, null, true, null, Map.of());
  }
}
