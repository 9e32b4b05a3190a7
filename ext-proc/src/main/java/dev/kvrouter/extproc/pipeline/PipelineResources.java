package dev.kvrouter.extproc.pipeline;

import dev.kvrouter.extproc.model.InlineSystemMode;
import dev.kvrouter.extproc.model.MessagesDialect;
import dev.kvrouter.extproc.model.ModelFiles;
import dev.kvrouter.extproc.model.ModelResources;
import dev.kvrouter.extproc.model.ModelResourcesLoader;
import dev.kvrouter.extproc.model.MultimodalSpec;
import dev.kvrouter.extproc.template.ChatTemplate;
import dev.kvrouter.extproc.template.ChatTemplateRenderer;
import dev.kvrouter.extproc.template.RenderLimits;
import dev.kvrouter.extproc.template.SpecialTokens;
import dev.kvrouter.extproc.template.TemplateEnvironment;
import dev.kvrouter.extproc.template.TokenizerChatConfig;
import dev.kvrouter.extproc.template.VllmChatRenderer;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import dev.kvrouter.extproc.tokenize.Tokenizer;
import dev.kvrouter.extproc.tokenize.TokenizerLoader;
import dev.kvrouter.extproc.tokenize.TokenizerOptions;
import java.nio.file.Files;
import java.time.Clock;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One model's request-path resources, loaded once by the model registry: its tokenizer (pure Java where
 * exact, DJL otherwise, both sharing the router's segment cache) and, when it has one, its chat template
 * compiled for vLLM's rendering rules, and its media expansion when one is configured.
 */
public final class PipelineResources implements ModelResources {

  private static final Logger log = LoggerFactory.getLogger(PipelineResources.class);

  private final Tokenizer tokenizer;
  private final VllmChatRenderer chat;
  private final VllmChatRenderer chatWithTools;
  private final MediaExpander media;
  private final MessagesDialect messages;

  public PipelineResources(Tokenizer tokenizer, VllmChatRenderer chat, VllmChatRenderer chatWithTools,
      MediaExpander media) {
    this.tokenizer = tokenizer;
    this.chat = chat;
    this.chatWithTools = chatWithTools == null ? chat : chatWithTools;
    this.media = media;
    MessagesDialectProbe.Result probed = MessagesDialectProbe.probe(chat, this.chatWithTools, tokenizer);
    this.messages = probed.dialect();
    if (chat != null) {
      log.info("Messages API inline system messages {}: {}; disabled thinking sends reasoning_effort {}",
          messages.inlineSystem() == InlineSystemMode.PRESERVE ? "kept in place" : "folded into adjacent turns",
          probed.reason(), messages.disabledThinkingEffort());
    }
  }

  /** Probed once at load, as vLLM probes its renderer on the first Messages request. */
  @Override
  public MessagesDialect messagesDialect() {
    return messages;
  }

  /** The model's media expansion, or null when media requests are routed by load. */
  public MediaExpander media() {
    return media;
  }

  public Tokenizer tokenizer() {
    return tokenizer;
  }

  /**
   * The chat renderer for a request, or null when the model has no chat template (completions only). Tokenizers
   * with named templates carry a separate one for requests with tools, which transformers picks the same way.
   */
  public VllmChatRenderer chat(boolean hasTools) {
    return hasTools ? chatWithTools : chat;
  }

  /** A loader for the model registry: every model's tokenizer shares {@code segments}. */
  public static ModelResourcesLoader loader(SegmentCache segments, Clock clock) {
    return (spec, files) -> load(files, spec.multimodal(), segments, clock);
  }

  static PipelineResources load(ModelFiles files, MultimodalSpec multimodal, SegmentCache segments, Clock clock)
      throws Exception {
    TokenizerOptions options = TokenizerOptions.defaults().withSegmentCache(segments);
    Tokenizer tokenizer = TokenizerLoader.load(files.tokenizerJson().getParent(), options);
    VllmChatRenderer chat = null;
    VllmChatRenderer withTools = null;
    MediaExpander media = null;
    try {
      media = multimodal == null ? null : new MediaExpander(multimodal, tokenizer);
      Map<String, String> placeholders = media == null ? Map.of() : media.placeholders();
      TemplateEnvironment env = new TemplateEnvironment(clock, RenderLimits.DEFAULT);
      if (files.chatTemplate() != null) {
        SpecialTokens special = files.tokenizerConfig() != null && Files.exists(files.tokenizerConfig())
            ? TokenizerChatConfig.load(files.tokenizerConfig()).specialTokens()
            : SpecialTokens.none();
        chat = renderer(Files.readString(files.chatTemplate()), special, env, placeholders);
      } else if (files.tokenizerConfig() != null && Files.exists(files.tokenizerConfig())) {
        TokenizerChatConfig cfg = TokenizerChatConfig.load(files.tokenizerConfig());
        String plain = cfg.templates().isEmpty() ? null : cfg.select(false);
        String tools = cfg.templates().isEmpty() ? null : cfg.select(true);
        chat = plain == null ? null : renderer(plain, cfg.specialTokens(), env, placeholders);
        withTools = tools == null || tools.equals(plain) ? null
            : renderer(tools, cfg.specialTokens(), env, placeholders);
      }
    } catch (Exception | Error e) {
      tokenizer.close();
      throw e;
    }
    return new PipelineResources(tokenizer, chat, withTools, media);
  }

  private static VllmChatRenderer renderer(String source, SpecialTokens special, TemplateEnvironment env,
      Map<String, String> mediaPlaceholders) {
    return new VllmChatRenderer(new ChatTemplateRenderer(ChatTemplate.compile(source), special, env), "auto",
        mediaPlaceholders, Map.of(), false);
  }

  @Override
  public void close() {
    tokenizer.close();
  }
}
