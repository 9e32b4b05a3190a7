package dev.kvrouter.extproc.template;

import java.util.List;
import java.util.Map;

/**
 * The fields of an OpenAI {@code /v1/chat/completions} request that shape the prompt vLLM
 * renders, as plain Java values (what Jackson produces).
 *
 * @param messages request messages (string or content-part content, tool calls, ...)
 * @param tools request tools, or null
 * @param toolChoice "none", "auto", "required", a named-tool object, or null
 * @param addGenerationPrompt vLLM's default is true
 * @param continueFinalMessage vLLM's default is false
 * @param documents RAG documents, or null
 * @param chatTemplateKwargs the request's chat_template_kwargs, or null
 * @param reasoningEffort "low"/"medium"/"high" or null
 */
public record ChatRequestFields(
    List<? extends Map<String, ?>> messages,
    List<? extends Map<String, ?>> tools,
    Object toolChoice,
    boolean addGenerationPrompt,
    boolean continueFinalMessage,
    List<? extends Map<String, ?>> documents,
    Map<String, ?> chatTemplateKwargs,
    String reasoningEffort) {

  /** Messages with vLLM's defaults for everything else. */
  public static ChatRequestFields of(List<? extends Map<String, ?>> messages) {
    return new ChatRequestFields(messages, null, null, true, false, null, null, null);
  }
}
