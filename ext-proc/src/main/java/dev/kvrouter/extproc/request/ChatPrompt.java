package dev.kvrouter.extproc.request;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A {@code /v1/chat/completions} prompt: exactly the inputs vLLM hands to its chat-template renderer, as plain Java
 * values ({@code String}, {@code Long}/{@code BigInteger}, {@code Double}, {@code Boolean}, {@code null},
 * {@code List}, {@code Map} with insertion order), decoded with Python's {@code json} semantics (duplicate keys
 * keep the last value at the first position, NaN and Infinity allowed). All collections are unmodifiable.
 *
 * <p>Messages are as the client sent them, with one exception: media payloads (image URLs, base64 data) are
 * replaced by the item's {@link MultimodalItem#identifier()}, because no template renders them (vLLM replaces media
 * parts by placeholders before templating) and a multi-megabyte image must not stay in memory.
 *
 * @param messages the conversation
 * @param tools the tools as vLLM passes them to the template ({@code tool.model_dump()}: {@code type}, then
 *     {@code function} with {@code name}, {@code description}, {@code parameters} (null when absent) and any extra
 *     keys, then extra keys), or null when the request has none (or {@code tool_choice: required} with an empty
 *     list, which vLLM turns into no tools)
 * @param toolChoice {@code "none"}, {@code "auto"}, {@code "required"}, a named-function map, or null; defaulted
 *     the way vLLM does ({@code "auto"} when tools are given without a choice)
 * @param documents {@code documents} for RAG templates, or null
 * @param addGenerationPrompt {@code add_generation_prompt} (default true)
 * @param continueFinalMessage {@code continue_final_message} (default false)
 * @param chatTemplateKwargs the client's {@code chat_template_kwargs} (for example {@code enable_thinking}); empty
 *     when absent
 * @param reasoningEffort {@code reasoning_effort}, or null
 * @param chatTemplate a template supplied in the request ({@code chat_template}), or null; vLLM only honours it
 *     with {@code --trust-request-chat-template}
 * @param addSpecialTokens {@code add_special_tokens} (vLLM's chat default: false; the template adds BOS)
 * @param truncatePromptTokens {@code truncate_prompt_tokens}, or null
 * @param truncationSide {@code truncation_side} ({@code "left"}, {@code "right"}), or null for the tokenizer's
 * @param mmProcessorKwargs {@code mm_processor_kwargs}, or empty
 */
public record ChatPrompt(
    List<Map<String, Object>> messages,
    List<Map<String, Object>> tools,
    Object toolChoice,
    List<Map<String, Object>> documents,
    boolean addGenerationPrompt,
    boolean continueFinalMessage,
    Map<String, Object> chatTemplateKwargs,
    String reasoningEffort,
    String chatTemplate,
    boolean addSpecialTokens,
    Integer truncatePromptTokens,
    String truncationSide,
    Map<String, Object> mmProcessorKwargs)
    implements Prompt {

  public ChatPrompt {
    messages = List.copyOf(messages);
    chatTemplateKwargs = chatTemplateKwargs == null ? Map.of() : chatTemplateKwargs;
    mmProcessorKwargs = mmProcessorKwargs == null ? Map.of() : mmProcessorKwargs;
  }

  /**
   * The keyword arguments vLLM passes to {@code apply_chat_template} besides {@code conversation} and
   * {@code tools}: the client's {@code chat_template_kwargs}, overridden by {@code add_generation_prompt},
   * {@code continue_final_message}, {@code documents} and {@code reasoning_effort} where those are set (vLLM's
   * {@code merge_kwargs} skips null values). Server-side defaults ({@code --default-chat-template-kwargs}) go
   * underneath, and the renderer still drops kwargs the template does not reference, as vLLM does.
   */
  public Map<String, Object> templateKwargs() {
    Map<String, Object> m = new LinkedHashMap<>(chatTemplateKwargs);
    m.put("add_generation_prompt", addGenerationPrompt);
    m.put("continue_final_message", continueFinalMessage);
    if (documents != null) {
      m.put("documents", documents);
    }
    if (reasoningEffort != null && !reasoningEffort.equals("auto")) {
      m.put("reasoning_effort", reasoningEffort);
    }
    return Collections.unmodifiableMap(m);
  }

  @Override
  public String toString() {
    return "ChatPrompt[" + messages.size() + " messages, " + (tools == null ? 0 : tools.size()) + " tools]";
  }
}
