package dev.kvrouter.extproc.template;

import dev.kvrouter.extproc.template.jinja.TemplateAnalysis;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * The whole of what vLLM's OpenAI server does between a chat request and the prompt text:
 * message preprocessing ({@link VllmChatPreprocessor}), tool dumping, {@code chat_template_kwargs}
 * merging and filtering, then {@code apply_chat_template} ({@link ChatTemplateRenderer}).
 *
 * <p>Immutable and thread-safe; build one per served model.
 */
public final class VllmChatRenderer {
  /** Tokenization arguments vLLM would forward; any non-default value changes token ids, so we refuse it. */
  private static final Set<String> TOKENIZATION_PARAMS = Set.of("padding", "truncation", "max_length",
      "return_tensors", "tokenizer_kwargs", "sanitize_control_tokens", "return_assistant_tokens_mask");

  private final ChatTemplateRenderer renderer;
  private final VllmChatPreprocessor preprocessor;
  private final Map<String, Object> defaultKwargs;
  private final boolean excludeToolsWhenToolChoiceNone;
  private final Set<String> templateNames;

  /**
   * @param renderer the model's template renderer
   * @param contentFormat vLLM's {@code --chat-template-content-format}: "auto", "string" or "openai"
   * @param mediaPlaceholders per-modality placeholder text for string-format multimodal models
   * @param defaultKwargs vLLM's {@code --default-chat-template-kwargs}
   * @param excludeToolsWhenToolChoiceNone vLLM's {@code --exclude-tools-when-tool-choice-none}
   */
  public VllmChatRenderer(ChatTemplateRenderer renderer, String contentFormat, Map<String, String> mediaPlaceholders,
      Map<String, ?> defaultKwargs, boolean excludeToolsWhenToolChoiceNone) {
    this.renderer = Objects.requireNonNull(renderer, "renderer");
    this.preprocessor = new VllmChatPreprocessor(ContentFormat.resolve(contentFormat, renderer.template()),
        mediaPlaceholders);
    this.defaultKwargs = new LinkedHashMap<>(defaultKwargs);
    this.excludeToolsWhenToolChoiceNone = excludeToolsWhenToolChoiceNone;
    this.templateNames = TemplateAnalysis.referencedNames(renderer.template().compiled());
  }

  public static VllmChatRenderer withDefaults(ChatTemplateRenderer renderer) {
    return new VllmChatRenderer(renderer, "auto", Map.of(), Map.of(), false);
  }

  public ContentFormat contentFormat() {
    return preprocessor.format();
  }

  /** The prompt vLLM would tokenize for this request. */
  public String render(ChatRequestFields req) {
    return renderer.render(templateInput(req));
  }

  /** The apply_chat_template arguments vLLM would pass for this request. */
  public ChatTemplateInput templateInput(ChatRequestFields req) {
    List<Map<String, Object>> conversation = preprocessor.conversation(req.messages());
    boolean dropTools = excludeToolsWhenToolChoiceNone && "none".equals(req.toolChoice());
    List<Map<String, Object>> tools = req.tools() == null || req.tools().isEmpty() || dropTools
        ? null : VllmChatPreprocessor.toolDicts(req.tools());

    // ChatParams: server defaults, then request kwargs, then the request's own fields; None and
    // "auto" never override (vllm.renderers.params.merge_kwargs).
    Map<String, Object> kw = new LinkedHashMap<>(defaultKwargs);
    if (req.chatTemplateKwargs() != null) {
      req.chatTemplateKwargs().forEach((k, v) -> {
        if (v != null && !"auto".equals(v)) {
          kw.put(k, v);
        }
      });
    }
    kw.put("add_generation_prompt", req.addGenerationPrompt());
    kw.put("continue_final_message", req.continueFinalMessage());
    if (req.documents() != null) {
      kw.put("documents", req.documents());
    }
    if (req.reasoningEffort() != null && !"auto".equals(req.reasoningEffort())) {
      kw.put("reasoning_effort", req.reasoningEffort());
    }

    // resolve_chat_template_kwargs
    if (kw.containsKey("chat_template") || kw.containsKey("tokenize")) {
      throw new ChatInputException("Found unexpected chat template kwargs from request");
    }
    Map<String, Object> accepted = new LinkedHashMap<>();
    kw.forEach((k, v) -> {
      if (VllmChatPreprocessor.HF_PARAMS.contains(k) || templateNames.contains(k)) {
        accepted.put(k, v);
      }
    });
    if (accepted.containsKey("conversation") || accepted.containsKey("tools")) {
      throw new ChatInputException("TypeError", "apply_chat_template() got multiple values for a keyword argument");
    }
    for (String p : TOKENIZATION_PARAMS) {
      Object v = accepted.get(p);
      if (v != null && !Boolean.FALSE.equals(v)) {
        throw new ChatInputException("chat_template_kwargs '" + p + "' changes tokenization and is not supported");
      }
    }
    boolean addGenerationPrompt = truthy(accepted.remove("add_generation_prompt"));
    boolean continueFinal = truthy(accepted.remove("continue_final_message"));
    Object documents = accepted.remove("documents");
    accepted.remove("return_dict");
    accepted.remove("chat_template");
    TOKENIZATION_PARAMS.forEach(accepted::remove);
    @SuppressWarnings("unchecked")
    List<? extends Map<String, ?>> docs = documents instanceof List<?> l ? (List<? extends Map<String, ?>>) l : null;
    if (documents != null && docs == null) {
      throw new ChatInputException("documents must be a list of objects");
    }
    return new ChatTemplateInput(conversation, tools, docs, addGenerationPrompt, continueFinal ? "content" : null,
        accepted);
  }

  private static boolean truthy(Object v) {
    return v instanceof Boolean b ? b : v != null && !(v instanceof Number n && n.doubleValue() == 0)
        && !(v instanceof String s && s.isEmpty());
  }
}
