package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.sim.engine.MediaSpan;
import dev.kvrouter.examples.workload.ChatAnswers;
import dev.kvrouter.examples.workload.TokenSpace;
import dev.kvrouter.examples.workload.ToolCallAnswer;
import dev.kvrouter.extproc.model.ModelFiles;
import dev.kvrouter.extproc.model.ModelSpec;
import dev.kvrouter.extproc.model.ModelSpecs;
import dev.kvrouter.extproc.model.MultimodalSpec;
import dev.kvrouter.extproc.pipeline.MediaExpander;
import dev.kvrouter.extproc.pipeline.PipelineResources;
import dev.kvrouter.extproc.pipeline.PromptTruncation;
import dev.kvrouter.extproc.request.ChatPrompt;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.MultimodalItem;
import dev.kvrouter.extproc.request.MultimodalPlacement;
import dev.kvrouter.extproc.request.RequestBodyParser;
import dev.kvrouter.extproc.template.ChatRequestFields;
import dev.kvrouter.extproc.template.TemplateException;
import dev.kvrouter.extproc.template.VllmChatRenderer;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Tokenizes prompts with the router's own request-path resources ({@link PipelineResources}: the model's
 * tokenizer and its chat template under vLLM's rendering rules), so a simulated worker sees exactly the token ids
 * the router hashed. Chat requests are parsed by the router's {@link RequestBodyParser}, rendered by its
 * {@link VllmChatRenderer} and tokenized without special tokens (the template writes them), as vLLM does;
 * completion prompts get the tokenizer's special tokens (BOS for Llama 3), as vLLM's completions endpoint adds
 * them.
 *
 * <p>Media (chat content parts such as {@code image_url}) are expanded by the router's own {@link MediaExpander}
 * when the model has a {@link MultimodalSpec}, so the prompt ids and each item's position are the router's; the
 * engine then keys the blocks each item overlaps with {@code [identifier, offset]}, as vLLM does. The identifier is
 * the part's {@code uuid} when the client gave one (vLLM uses it in place of its content hash); otherwise the
 * worker uses its own content hash, which the router cannot know, as it cannot know vLLM's hash of the pixels.
 * Media the model cannot take (no expansion for the modality) is refused with a 400, as vLLM refuses it.
 *
 * <p>Output text needs no detokenizer: the simulated model speaks a fixed passage whose words are each one token
 * (checked when the encoder is built), so each output id maps to its word.
 *
 * <p>Thread-safe: the tokenizer and renderers are shared by all request threads, as in the router.
 */
public final class PipelinePromptEncoder implements PromptEncoder, AutoCloseable {

  /** The simulated model's answer, cycled; words that are not a single token are left out. */
  private static final String OUTPUT_PASSAGE = " The quick brown fox jumps over the lazy dog while the router keeps "
      + "every prefix warm and each worker answers in turn with steady tokens of simulated text";

  private static final ObjectMapper JSON = new ObjectMapper();

  private final String model;
  private final PipelineResources resources;
  private final RequestBodyParser parser = new RequestBodyParser();
  private final int[] outputVocabulary;
  private final Map<Integer, String> outputText;
  /** The template's end-of-turn token, once asked for (a benign race computes it twice). */
  private volatile Integer endOfTurn;

  private PipelinePromptEncoder(String model, PipelineResources resources) {
    this.model = model;
    this.resources = resources;
    Map<Integer, String> words = new LinkedHashMap<>();
    for (String w : OUTPUT_PASSAGE.split("(?= )")) {
      int[] ids = resources.tokenizer().encode(w, false);
      if (ids.length == 1) {
        words.putIfAbsent(ids[0], w);
      }
    }
    if (words.size() < 4) {
      throw new IllegalStateException("the output passage has fewer than 4 single-token words in this tokenizer");
    }
    this.outputText = Map.copyOf(words);
    this.outputVocabulary = words.keySet().stream().mapToInt(Integer::intValue).toArray();
  }

  /**
   * Loads the model's tokenizer and chat template the way the router's model registry does, with the media
   * expansion of a model whose media the router reproduces ({@code multimodal:} in the router's model config, e.g.
   * {@code {preset: gemma3}}).
   *
   * @param model the served model name (only for messages)
   * @param tokenizer a directory holding {@code tokenizer.json} (and {@code tokenizer_config.json}, optionally
   *     {@code chat_template.jinja}), or a {@code tokenizer.json}
   * @param multimodal the model's media expansion, or null for a text-only model (media requests get a 400)
   * @param segments the tokenizer's segment cache (the router's default bound for a worker process)
   * @throws IOException if the files are missing or cannot be loaded
   */
  public static PipelinePromptEncoder load(String model, Path tokenizer, MultimodalSpec multimodal,
      SegmentCache segments) throws IOException {
    List<String> problems = new ArrayList<>();
    Path abs = tokenizer.toAbsolutePath().normalize();
    if (multimodal != null) {
      multimodal.validate("multimodal").forEach(problems::add);
      if (!problems.isEmpty()) {
        throw new IOException("invalid multimodal spec: " + String.join("; ", problems));
      }
    }
    ModelSpec base = ModelSpec.of(model, abs.toString());
    ModelSpec spec = new ModelSpec(base.name(), base.tokenizer(), base.tokenizerConfig(), base.chatTemplate(),
        base.blockSize(), base.adapters(), base.tenancy(), base.preload(), multimodal);
    ModelFiles files = ModelSpecs.resolveFiles(spec, "tokenizer", abs.getParent() == null ? abs : abs.getParent(),
        problems);
    if (files == null || !problems.isEmpty() || !Files.isRegularFile(files.tokenizerJson())) {
      throw new IOException("cannot use tokenizer " + tokenizer + ": " + String.join("; ", problems));
    }
    try {
      PipelineResources res = (PipelineResources) PipelineResources
          .loader(segments, Clock.systemUTC()).load(spec, files);
      return new PipelinePromptEncoder(model, res);
    } catch (IOException e) {
      throw e;
    } catch (Exception e) {
      throw new IOException("cannot load tokenizer " + tokenizer + ": " + e.getMessage(), e);
    }
  }

  /** The router-side resources (the virtual-time A/B hashes with the very same instance). */
  public PipelineResources resources() {
    return resources;
  }

  @Override
  public int[] encodeCompletion(String prompt) {
    return resources.tokenizer().encode(prompt, true);
  }

  @Override
  public int[] encodeChat(JsonNode request) {
    return encodeChatPrompt(request).tokens();
  }

  @Override
  public ChatTokens encodeChatPrompt(JsonNode request) {
    return prompt(parse(InferenceRequest.Kind.CHAT, request));
  }

  /**
   * The router's own conversion ({@link RequestBodyParser} with {@link InferenceRequest.Kind#RESPONSES}), so the
   * engine prefills exactly the tokens the router hashed. What the router cannot reproduce from the body is refused
   * rather than guessed: the worker keeps no conversations, and input items vLLM hands to the template raw would be
   * rendered by a template the router never sees them through.
   */
  @Override
  public ChatTokens encodeResponsesPrompt(JsonNode request) {
    InferenceRequest parsed = parse(InferenceRequest.Kind.RESPONSES, request);
    String why = parsed.unreproducible();
    if (InferenceRequest.RESPONSES_STORED.equals(why) || InferenceRequest.RESPONSES_PREVIOUS_INPUT.equals(why)
        || InferenceRequest.RESPONSES_ITEM.equals(why)) {
      throw new Unsupported("the simulated worker cannot serve this Responses input (" + why + ")");
    }
    return prompt(parsed);
  }

  /**
   * The router's own conversion ({@link RequestBodyParser} with {@link InferenceRequest.Kind#MESSAGES}), with inline
   * system messages placed as the model's template wants them: the mode the router's probe found for these very
   * resources, which is what vLLM's {@code --anthropic-inline-system auto} decides. A request with an image is
   * refused rather than guessed, as the router does not reproduce its prompt.
   */
  @Override
  public ChatTokens encodeMessagesPrompt(JsonNode request) {
    InferenceRequest parsed = parse(InferenceRequest.Kind.MESSAGES, request);
    if (InferenceRequest.MESSAGES_MEDIA.equals(parsed.unreproducible())) {
      throw new Unsupported("the simulated worker cannot serve this Messages input (" + parsed.unreproducible()
          + ")");
    }
    return prompt(parsed);
  }

  private InferenceRequest parse(InferenceRequest.Kind kind, JsonNode request) {
    byte[] body;
    try {
      body = JSON.writeValueAsBytes(request);
    } catch (IOException e) {
      throw new Unsupported("request cannot be re-encoded: " + e.getMessage());
    }
    try {
      return parser.parse(kind, body, body.length, m -> resources.messagesDialect());
    } catch (RequestBodyParser.BadRequest e) {
      // the router's Responses and Messages refusals are vLLM's own 400s (malformed items or blocks, a prompt
      // template, encrypted reasoning)
      throw kind == InferenceRequest.Kind.CHAT ? new Unsupported(e.error().message())
          : new BadInput(e.error().message());
    }
  }

  /**
   * The token ids the engine computes for a parsed chat request: the template rendered exactly as the router's
   * request path renders it, tokenized as the request asks ({@code add_special_tokens}, default false) and
   * truncated to {@code truncate_prompt_tokens} as vLLM does ({@link PromptTruncation}).
   *
   * @throws Unsupported when the model has no chat template, the request brings its own, or rendering fails
   * @throws BadInput when the request holds media the model cannot take
   */
  public int[] tokens(InferenceRequest request) {
    return prompt(request).tokens();
  }

  /**
   * The chat prompt the engine prefills: {@link #tokens}, with media placeholders expanded and each item placed
   * by the router's {@link MediaExpander}.
   *
   * @throws Unsupported when the model has no chat template, the request brings its own, or rendering fails
   * @throws BadInput when the request holds media the model cannot take
   */
  public ChatTokens prompt(InferenceRequest request) {
    ChatPrompt chat = request.chat();
    List<MultimodalItem> items = request.multimodal();
    if (!items.isEmpty()) {
      checkMedia(items, chat);
    }
    String text = render(chat);
    if (!items.isEmpty()) {
      return expand(resources.tokenizer().encode(text, chat.addSpecialTokens()), items, text);
    }
    // vLLM's truncation, as the router reproduces it (BOS kept when the tokenizer truncates, PromptTruncation)
    int[] ids = PromptTruncation.text(resources.tokenizer(), text, chat.addSpecialTokens(),
        chat.truncatePromptTokens(), chat.truncationSide());
    if (ids == null) {
      throw new Unsupported("truncate_prompt_tokens with special tokens this tokenizer's post-processor hides");
    }
    return new ChatTokens(ids, List.of(), text);
  }

  /** The chat template's rendering of {@code chat}, as the router's request path renders it. */
  private String render(ChatPrompt chat) {
    VllmChatRenderer renderer = resources.chat(chat.tools() != null && !chat.tools().isEmpty());
    if (renderer == null) {
      throw new Unsupported("model " + model + " has no chat template");
    }
    if (chat.chatTemplate() != null) {
      throw new Unsupported("request chat templates are not accepted (vLLM needs --trust-request-chat-template)");
    }
    try {
      return renderer.render(new ChatRequestFields(chat.messages(), chat.tools(), chat.toolChoice(),
          chat.addGenerationPrompt(), chat.continueFinalMessage(), chat.documents(), chat.chatTemplateKwargs(),
          chat.reasoningEffort()));
    } catch (TemplateException e) {
      throw new Unsupported("chat template failed: " + e.getMessage());
    }
  }

  /**
   * The tokens the model generates for a scripted tool-call answer to a {@code /v1/messages} or
   * {@code /v1/chat/completions} request ({@link ToolCallRendering}), rendered and tokenized as the router's request
   * path renders the history that resends it.
   */
  @Override
  public ToolCallScript toolCallScript(InferenceRequest.Kind kind, JsonNode request, ToolCallAnswer answer) {
    return toolCallScript(kind, request, answer, null);
  }

  /**
   * As {@link #toolCallScript(InferenceRequest.Kind, JsonNode, ToolCallAnswer)}; {@code promptText}, the request's
   * own rendering ({@link ChatTokens#text} of its prompt), is rendered again only when null: it is what the script
   * starts from, and a worker has it already, on every scripted request's path.
   */
  @Override
  public ToolCallScript toolCallScript(InferenceRequest.Kind kind, JsonNode request, ToolCallAnswer answer,
      String promptText) {
    String prompt = promptText != null ? promptText : renderText(kind, request);
    return rendering().script(kind, request, prompt, answer);
  }

  /** A body of that kind, converted and rendered as the router's request path renders it. */
  String renderText(InferenceRequest.Kind kind, JsonNode body) {
    return render(parse(kind, body).chat());
  }

  /** The derivation of tool-call scripts over this encoder's template and tokenizer. */
  ToolCallRendering rendering() {
    return new ToolCallRendering(this::renderText, text -> resources.tokenizer().encode(text, false), endOfTurn());
  }

  /** {@link #endOfTurnToken}, computed once. */
  private int endOfTurn() {
    Integer t = endOfTurn;
    if (t == null) {
      t = endOfTurnToken();
      endOfTurn = t;
    }
    return t;
  }

  /** Refuses media the model cannot take, as vLLM does (400), before any rendering. */
  private void checkMedia(List<MultimodalItem> items, ChatPrompt chat) {
    MediaExpander media = resources.media();
    for (MultimodalItem item : items) {
      if (media == null || !media.covers(List.of(item))) {
        throw new BadInput("model " + model + " does not support " + item.modality().key() + " input (messages["
            + item.message() + "].content[" + item.part() + "])");
      }
    }
    // Both change the expansion or the positions in ways the router does not reproduce: refused, so that the
    // simulator never serves a prompt whose blocks differ from the router's silently.
    if (!chat.mmProcessorKwargs().isEmpty()) {
      throw new BadInput("the simulated worker does not accept `mm_processor_kwargs`");
    }
    if (chat.truncatePromptTokens() != null) {
      throw new BadInput("the simulated worker does not accept `truncate_prompt_tokens` with media");
    }
  }

  /** The router's expansion of {@code ids}, with each item's engine identifier. */
  private ChatTokens expand(int[] ids, List<MultimodalItem> items, String text) {
    MediaExpander.Expanded expanded;
    try {
      expanded = resources.media().expand(ids, items);
    } catch (MediaExpander.Mismatch e) {
      throw new BadInput("the prompt's media placeholders do not match its media items: " + e.getMessage());
    }
    List<MediaSpan> spans = new ArrayList<>(expanded.placements().size());
    for (MultimodalPlacement p : expanded.placements()) {
      spans.add(new MediaSpan(engineIdentifier(p.item()), p.offset(), p.length()));
    }
    return new ChatTokens(expanded.tokens(), spans, text);
  }

  /**
   * The identifier the engine keys an item by: the client's uuid, as vLLM; otherwise a content hash of the
   * engine's own (vLLM hashes the decoded media), deliberately not the router's derived identifier, so that, as
   * with a real engine, the router cannot predict such blocks from the request.
   */
  static String engineIdentifier(MultimodalItem item) {
    if (item.clientUuid()) {
      return item.identifier();
    }
    String id = item.identifier();
    return ENGINE_HASH_PREFIX + (id.startsWith(MultimodalItem.DERIVED_PREFIX)
        ? id.substring(MultimodalItem.DERIVED_PREFIX.length()) : id);
  }

  /** Prefix of identifiers the simulated engine derives from media content (no client uuid). */
  static final String ENGINE_HASH_PREFIX = "sim-mm:";

  /**
   * The model's side of scripted chat answers ({@code multi-turn:format=chat,answers=model}): the answer text
   * encoded by this tokenizer without special tokens, then {@link #endOfTurnToken()}.
   *
   * @throws Unsupported when the model has no chat template or it writes nothing after an assistant message
   */
  @Override
  public ChatAnswers chatAnswers(TokenSpace space) {
    return new ChatAnswers(space, text -> resources.tokenizer().encode(text, false), endOfTurnToken());
  }

  /**
   * The token an assistant message ends with in this model's chat template, i.e. the one the model samples to end
   * its turn: the first token after the content of a rendered assistant message ({@code <|im_end|>} for Qwen3,
   * {@code <|eot_id|>} for Llama 3, {@code <end_of_turn>} for Gemma 3, {@code <｜end▁of▁sentence｜>} for DeepSeek
   * V3).
   *
   * @throws Unsupported when the model has no chat template or it writes nothing after an assistant message
   */
  public int endOfTurnToken() {
    VllmChatRenderer renderer = resources.chat(false);
    if (renderer == null) {
      throw new Unsupported("model " + model + " has no chat template");
    }
    String mark = "time";
    String text;
    try {
      text = renderer.render(new ChatRequestFields(List.of(Map.of("role", "user", "content", "hello"),
          Map.of("role", "assistant", "content", mark)), null, null, false, false, null, null, null));
    } catch (TemplateException e) {
      throw new Unsupported("chat template failed: " + e.getMessage());
    }
    int[] after = resources.tokenizer().encode(text.substring(text.lastIndexOf(mark) + mark.length()), false);
    if (after.length == 0) {
      throw new Unsupported("model " + model + "'s chat template ends an assistant message with nothing");
    }
    return after[0];
  }

  @Override
  public String tokenText(int tokenId) {
    String t = outputText.get(tokenId);
    return t != null ? t : "";
  }

  @Override
  public int[] outputVocabulary() {
    return outputVocabulary.clone();
  }

  @Override
  public void close() {
    resources.close();
  }
}
