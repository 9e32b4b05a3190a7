package dev.kvrouter.extproc.request;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.exc.StreamConstraintsException;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import dev.kvrouter.extproc.model.MessagesDialect;
import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import java.io.IOException;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;

/**
 * Parses an OpenAI request body in one pass with Jackson's streaming parser, keeping only what the request path
 * uses: the prompt (chat messages and their template inputs, or completions prompts as text or token ids), the
 * cache salt, the output hints, and where {@code cache_salt} sits in the bytes. Unused fields are skipped without
 * being decoded, and no JSON tree is built for the body.
 *
 * <p>Validation follows vLLM's request models, so the router rejects (400, naming the offending parameter) what
 * the engine would reject about the fields it consumes into the prompt or the cache identity, and accepts what
 * the engine accepts: pydantic's lax booleans, Python truthiness in vLLM's cross-field checks, Python's JSON
 * number and duplicate-key semantics. Fields the router only estimates with ({@code max_tokens}, {@code n}, ...)
 * never cause a rejection; the engine validates them. The Messages API is the exception ({@link MessagesRequestCheck}):
 * its request model requires {@code max_tokens} and types every top-level field, so such a 400 does not depend on
 * the worker. Error messages never quote the body.
 *
 * <p>Thread-safe and stateless; one instance serves every stream.
 */
public final class RequestBodyParser {

  /** Deepest nesting accepted; deeper bodies get 400 (Python's own parser overflows its stack near 1000). */
  public static final int MAX_DEPTH = 128;

  static final JsonFactory JSON = JsonFactory.builder()
      .streamReadConstraints(new PythonJsonLimits(MAX_DEPTH))
      .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS) // Python's json accepts NaN and Infinity
      .build();

  private static final Set<String> MESSAGES_EFFORTS = Set.of("low", "medium", "high", "xhigh", "max");

  /** vLLM's default {@code VLLM_MAX_STOP_STRINGS} (vllm/envs.py): the most Messages {@code stop_sequences}. */
  public static final int DEFAULT_MAX_STOP_STRINGS = 4;

  private final int maxStopStrings;

  /** A parser for workers with vLLM's default {@code VLLM_MAX_STOP_STRINGS}. */
  public RequestBodyParser() {
    this(DEFAULT_MAX_STOP_STRINGS);
  }

  /** @param maxStopStrings the workers' {@code VLLM_MAX_STOP_STRINGS}: most Messages {@code stop_sequences} */
  public RequestBodyParser(int maxStopStrings) {
    this.maxStopStrings = maxStopStrings;
  }

  /**
   * The top-level {@code model} string of a JSON object body, read without building it (other members are skipped);
   * null when the body is not such an object, has no string {@code model}, or is malformed. For requests the router
   * does not route, which it only steers to their model's pool.
   */
  public static String modelOf(java.io.InputStream body) {
    try (JsonParser p = JSON.createParser(body)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        return null;
      }
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        JsonToken value = p.nextToken();
        if ("model".equals(name)) {
          return value == JsonToken.VALUE_STRING ? p.getText() : null;
        }
        p.skipChildren();
      }
      return null;
    } catch (java.io.IOException | RuntimeException e) {
      return null; // not JSON, too deep: the engine answers it as it would anyway
    }
  }

  private static final String PROMPT_SHAPES =
      "`prompt` must be a string, a list of strings, a list of token ids or a list of token-id lists";

  /** Thrown for a body that is not a valid request; carries the 400 error to send back. */
  public static final class BadRequest extends Exception {
    private final OpenAiError error;

    public BadRequest(OpenAiError error) {
      super(error.message(), null, false, false);
      this.error = error;
    }

    public OpenAiError error() {
      return error;
    }
  }

  static BadRequest bad(String message, String param) {
    return new BadRequest(OpenAiError.badRequest(message, param));
  }

  public InferenceRequest parse(Kind kind, byte[] body, int length) throws BadRequest {
    return parse(kind, body, length, model -> MessagesDialect.DEFAULT);
  }

  /**
   * @param dialect for a Messages API request, what vLLM's probes of its model's chat template decide (where inline
   *     system messages go, the effort for disabled thinking); unused for the other kinds
   */
  public InferenceRequest parse(Kind kind, byte[] body, int length,
      Function<String, MessagesDialect> dialect) throws BadRequest {
    Fields f = new Fields(kind, body, length, dialect, maxStopStrings);
    CacheSaltSites sites;
    try (JsonParser p = JSON.createParser(body, 0, length)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw bad("request body must be a JSON object", null);
      }
      CacheSaltSites.Recorder recorder = new CacheSaltSites.Recorder(p);
      JsonToken t;
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        p.nextToken();
        recorder.field(name);
        f.read(name, p);
      }
      if (t != JsonToken.END_OBJECT || p.nextToken() != null) {
        throw bad("request body is not a single JSON object", null);
      }
      sites = recorder.sites();
    } catch (PythonJsonLimits.IntegerTooLong e) {
      throw bad(e.getOriginalMessage(), null);
    } catch (StreamConstraintsException e) {
      throw bad("request body nests deeper than " + MAX_DEPTH + " levels", null);
    } catch (JsonParseException e) {
      // Jackson's own message can quote the offending input; report only where it broke.
      throw bad("request body is not valid JSON (line " + e.getLocation().getLineNr() + ", column "
          + e.getLocation().getColumnNr() + ")", null);
    } catch (IOException e) {
      throw bad("request body could not be read: " + e.getClass().getSimpleName(), null);
    }
    return f.build(sites, length);
  }

  /** The top-level fields of one body, gathered in one pass and validated once the object has ended. */
  private static final class Fields {
    final Kind kind;
    final byte[] body;
    final int length;
    Object model;
    boolean modelPresent;
    Object cacheSalt;
    boolean cacheSaltPresent;
    Object stream;
    Object streamOptions;
    Object maxTokens;
    boolean maxTokensPresent;
    Object maxCompletionTokens;
    Object maxOutputTokens;
    Object previousResponseId;
    boolean requestIdGiven;
    Object minTokens;
    Object n;
    Object bestOf;
    Object ignoreEos;
    Object truncatePromptTokens;
    Object truncationSide;
    Object addSpecialTokens;
    boolean addSpecialTokensPresent;
    // completions
    List<CompletionPrompt.Input> prompts;
    boolean promptEmpty;
    boolean promptEmbeds;
    // chat
    Messages messages;
    boolean messagesPresent;
    Object tools;
    boolean toolsPresent;
    Object toolChoice;
    boolean toolChoicePresent;
    Object documents;
    Object addGenerationPrompt;
    boolean addGenerationPromptPresent;
    Object continueFinalMessage;
    boolean continueFinalMessagePresent;
    Object chatTemplateKwargs;
    Object reasoningEffort;
    Object chatTemplate;
    Object mmProcessorKwargs;
    // responses
    Object input;
    boolean inputPresent;
    MediaParts inputMedia;
    Object instructions;
    Object reasoning;
    Object truncation;
    boolean truncationPresent;
    Object promptTemplate;
    Object previousResponse;
    Object previousInputMessages;
    // messages (Anthropic)
    Object anthropicMessages;
    boolean anthropicMessagesPresent;
    Object system;
    Object thinking;
    Object outputConfig;
    final Map<String, Object> messagesCheckedOnly = new LinkedHashMap<>();
    final Function<String, MessagesDialect> dialect;
    final int maxStopStrings;

    Fields(Kind kind, byte[] body, int length, Function<String, MessagesDialect> dialect, int maxStopStrings) {
      this.kind = kind;
      this.body = body;
      this.length = length;
      this.dialect = dialect;
      this.maxStopStrings = maxStopStrings;
    }

    void read(String name, JsonParser p) throws IOException, BadRequest {
      JsonToken v = p.currentToken();
      boolean chat = kind == Kind.CHAT;
      boolean completions = kind == Kind.COMPLETIONS;
      boolean responses = kind == Kind.RESPONSES;
      boolean anthropic = kind == Kind.MESSAGES;
      boolean chatLike = chat || responses || anthropic;
      switch (name) {
        case "model" -> {
          modelPresent = true;
          model = JsonValues.read(p, v);
        }
        case "cache_salt" -> {
          cacheSaltPresent = true;
          // Only a string or null is valid; a container is skipped (the site recorder may have done so already).
          cacheSalt = v == JsonToken.VALUE_STRING ? p.getText() : v == JsonToken.VALUE_NULL ? null : Boolean.FALSE;
          if (v == JsonToken.START_OBJECT || v == JsonToken.START_ARRAY) {
            p.skipChildren();
          }
        }
        case "stream" -> stream = JsonValues.read(p, v);
        case "stream_options" -> streamOptions = JsonValues.read(p, v);
        case "max_tokens" -> {
          maxTokensPresent = true;
          maxTokens = JsonValues.read(p, v);
        }
        case "max_completion_tokens" -> maxCompletionTokens = JsonValues.read(p, v);
        case "max_output_tokens" -> maxOutputTokens = readIf(kind == Kind.RESPONSES, p, v);
        case "previous_response_id" -> previousResponseId = readIf(kind == Kind.RESPONSES, p, v);
        case "request_id" -> {
          requestIdGiven = true; // any value, null too: a second key would be the client's to explain
          p.skipChildren();
        }
        case "min_tokens" -> minTokens = JsonValues.read(p, v);
        case "n" -> n = JsonValues.read(p, v);
        case "best_of" -> bestOf = JsonValues.read(p, v);
        case "ignore_eos" -> ignoreEos = JsonValues.read(p, v);
        case "truncate_prompt_tokens" -> truncatePromptTokens = JsonValues.read(p, v);
        case "truncation_side" -> truncationSide = JsonValues.read(p, v);
        case "add_special_tokens" -> {
          addSpecialTokensPresent = true;
          addSpecialTokens = JsonValues.read(p, v);
        }
        case "prompt" -> {
          if (responses) {
            promptTemplate = JsonValues.read(p, v);
          } else if (!completions) {
            p.skipChildren();
          } else {
            prompts = Prompts.read(p, v);
            promptEmpty = v == JsonToken.VALUE_STRING && ((CompletionPrompt.Text) prompts.get(0)).text().isEmpty();
          }
        }
        case "prompt_embeds" -> {
          if (!completions) {
            p.skipChildren();
          } else {
            promptEmbeds = JsonValues.skipTruthy(p, v);
          }
        }
        case "messages" -> {
          if (chat) {
            messagesPresent = true;
            messages = v == JsonToken.START_ARRAY ? Messages.read(p, body, length) : null;
            if (messages == null) {
              p.skipChildren();
            }
          } else if (anthropic) {
            anthropicMessagesPresent = true;
            anthropicMessages = JsonValues.read(p, v);
          } else {
            p.skipChildren();
          }
        }
        case "input" -> {
          if (responses) {
            inputPresent = true;
            inputMedia = new MediaParts(body, length); // a repeated key replaces the earlier input and its items
            input = ResponsesInput.read(p, v, inputMedia);
          } else {
            p.skipChildren();
          }
        }
        case "instructions" -> instructions = readIf(responses, p, v);
        case "system" -> system = readIf(anthropic, p, v);
        case "thinking" -> thinking = readIf(anthropic, p, v);
        case "output_config" -> outputConfig = readIf(anthropic, p, v);
        case "reasoning" -> reasoning = readIf(responses, p, v);
        case "truncation" -> {
          truncationPresent = responses;
          truncation = readIf(responses, p, v);
        }
        case "previous_response" -> previousResponse = readIf(responses, p, v);
        case "previous_input_messages" -> previousInputMessages = readIf(responses, p, v);
        case "tools" -> {
          toolsPresent = true;
          tools = readIf(chatLike, p, v);
        }
        case "tool_choice" -> {
          toolChoicePresent = chatLike;
          toolChoice = readIf(chatLike, p, v);
        }
        case "documents" -> documents = readIf(chat, p, v);
        case "add_generation_prompt" -> {
          addGenerationPromptPresent = chat;
          addGenerationPrompt = readIf(chat, p, v);
        }
        case "continue_final_message" -> {
          continueFinalMessagePresent = chat;
          continueFinalMessage = readIf(chat, p, v);
        }
        case "chat_template_kwargs" -> chatTemplateKwargs = readIf(chatLike, p, v);
        case "reasoning_effort" -> reasoningEffort = readIf(chat, p, v);
        case "chat_template" -> chatTemplate = readIf(chat, p, v);
        case "mm_processor_kwargs" -> mmProcessorKwargs = readIf(chat || responses, p, v);
        default -> {
          if (anthropic && MessagesRequestCheck.CHECKED_ONLY.contains(name)) {
            messagesCheckedOnly.put(name, JsonValues.read(p, v));
          } else {
            p.skipChildren();
          }
        }
      }
    }

    private static Object readIf(boolean wanted, JsonParser p, JsonToken v) throws IOException {
      if (wanted) {
        return JsonValues.read(p, v);
      }
      p.skipChildren();
      return null;
    }

    InferenceRequest build(CacheSaltSites sites, int bodyBytes) throws BadRequest {
      if (!(model instanceof String m) || m.isEmpty()) {
        throw bad(modelPresent && model != null ? "`model` must be a string" : "you must provide a `model` string",
            "model");
      }
      if (cacheSaltPresent && cacheSalt != null && !(cacheSalt instanceof String s && !s.isEmpty())) {
        throw bad("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
      }
      if (cacheSalt instanceof String s && s.codePoints().anyMatch(c -> c >= 0xD800 && c <= 0xDFFF)) {
        // Salts are keyed by their UTF-8 bytes, which an unpaired surrogate does not have (Java writes "?"): keyed
        // anyway, "s\ud800" would share the partition of "s?"
        throw bad("Parameter 'cache_salt' must be Unicode text (it has an unpaired surrogate escape)", "cache_salt");
      }
      if (PythonValues.truthy(streamOptions) && !PythonValues.truthy(stream)) {
        throw bad("Stream options can only be defined when `stream=True`.", "stream_options");
      }
      boolean streaming = Boolean.TRUE.equals(PythonValues.laxBool(stream));
      Boolean includeUsage = streamOptions instanceof Map<?, ?> so && so.get("include_usage") != null
          ? PythonValues.laxBool(so.get("include_usage"))
          : null;
      // neither a Responses nor a Messages request has these fields (vLLM ignores them there)
      boolean chatOrCompletions = kind == Kind.CHAT || kind == Kind.COMPLETIONS;
      Integer truncate = chatOrCompletions ? truncatePromptTokens() : null;
      String side = chatOrCompletions ? truncationSide() : null;
      String unreproducible = null;
      Prompt prompt;
      List<MultimodalItem> items = List.of();
      if (kind == Kind.CHAT) {
        if (!messagesPresent || messages == null) {
          throw bad("`messages` must be a list", "messages");
        }
        Tools.Normalized t = Tools.normalize(tools, toolChoicePresent, toolChoice);
        boolean agp = bool("add_generation_prompt", addGenerationPromptPresent, addGenerationPrompt, true);
        boolean cfm = bool("continue_final_message", continueFinalMessagePresent, continueFinalMessage, false);
        // vLLM's check_generation_prompt tests the raw values with Python truthiness.
        if (PythonValues.truthy(continueFinalMessage) && PythonValues.truthy(addGenerationPrompt)) {
          throw bad("Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
              "continue_final_message");
        }
        Map<String, Object> mmKwargs = mapOrNull(mmProcessorKwargs, "mm_processor_kwargs");
        items = mediaItems(messages.items, mmKwargs);
        prompt = new ChatPrompt(
            messages.list,
            t.tools(),
            t.toolChoice(),
            documents(),
            agp,
            cfm,
            mapOrNull(chatTemplateKwargs, "chat_template_kwargs"),
            stringOrNull(reasoningEffort, "reasoning_effort"),
            stringOrNull(chatTemplate, "chat_template"),
            bool("add_special_tokens", addSpecialTokensPresent, addSpecialTokens, false),
            truncate,
            side,
            mmKwargs);
        unreproducible = messages.unreproducible;
      } else if (kind == Kind.MESSAGES) {
        prompt = messagesPrompt((String) model);
        unreproducible = messagesUnreproducible;
      } else if (kind == Kind.RESPONSES) {
        prompt = responsesPrompt();
        Map<String, Object> mmKwargs = ((ChatPrompt) prompt).mmProcessorKwargs();
        items = mediaItems(inputMedia.items(), mmKwargs);
        unreproducible = responsesUnreproducible;
      } else {
        boolean noPrompt = prompts == null || promptEmpty;
        if (noPrompt && !promptEmbeds) {
          throw bad("Either prompt or prompt_embeds must be provided and non-empty.", "prompt");
        }
        if (promptEmbeds) {
          unreproducible = "prompt_embeds";
        }
        prompt = new CompletionPrompt(prompts == null ? List.of() : prompts,
            bool("add_special_tokens", addSpecialTokensPresent, addSpecialTokens, true), truncate, side);
      }
      InferenceRequest.ResponsesFields responses = kind != Kind.RESPONSES ? null
          : new InferenceRequest.ResponsesFields(previousResponseId instanceof String id ? id : null, requestIdGiven);
      return new InferenceRequest(kind, (String) model, streaming, includeUsage, (String) cacheSalt, output(),
          prompt, items, unreproducible, sites, bodyBytes, responses);
    }

    private String responsesUnreproducible;
    private String messagesUnreproducible;

    /**
     * The chat prompt vLLM renders for an Anthropic Messages request ({@code to_chat_completion_request}): messages
     * from {@link MessagesInput}, tools from {@link Tools#messages}, {@code chat_template_kwargs} as sent, and the
     * reasoning effort of {@code output_config.effort}, which {@code thinking: {"type": "disabled"}} overrides with the
     * model's disabled-thinking effort. The result is a chat request as vLLM's current chat path builds its template
     * kwargs ({@code build_chat_params}: an effort turns {@code enable_thinking} on, off for "none", unless the client
     * set it), tokenized as chat's (no special tokens added: the template has them).
     */
    private ChatPrompt messagesPrompt(String model) throws BadRequest {
      if (!anthropicMessagesPresent) {
        throw bad("`messages` is required", "messages");
      }
      BigInteger max = MessagesRequestCheck.maxTokens(maxTokensPresent, maxTokens);
      MessagesDialect d = dialect.apply(model);
      MessagesInput.Converted conv = MessagesInput.convert(system, anthropicMessages, d.inlineSystem());
      messagesUnreproducible = conv.unreproducible();
      Tools.Normalized t = Tools.messages(tools, toolChoice);
      String effort = null;
      if (outputConfig != null) {
        if (!(outputConfig instanceof Map<?, ?> oc)) {
          throw bad("`output_config` must be an object", "output_config");
        }
        Object e = oc.get("effort");
        if (e != null && !MESSAGES_EFFORTS.contains(e)) {
          throw bad("`output_config.effort` must be one of low, medium, high, xhigh, max", "output_config.effort");
        }
        effort = (String) e;
        MessagesRequestCheck.outputFormat(oc);
      }
      if ("disabled".equals(MessagesRequestCheck.thinking(thinking, max))) {
        effort = d.disabledThinkingEffort();
      }
      MessagesRequestCheck.stream(stream);
      MessagesRequestCheck.cacheSalt(cacheSalt);
      MessagesRequestCheck.checkedOnly(messagesCheckedOnly, maxStopStrings);
      Map<String, Object> kwargs = thinkingFromEffort(mapOrNull(chatTemplateKwargs, "chat_template_kwargs"), effort);
      return new ChatPrompt(conv.messages(), t.tools(), t.toolChoice(), null, true, false, kwargs, effort, null, false,
          null, null, null);
    }

    /** {@code build_chat_params}: a reasoning effort turns thinking on (off for "none") unless the client set it. */
    private static Map<String, Object> thinkingFromEffort(Map<String, Object> kwargs, String effort) {
      if (effort == null || kwargs != null && kwargs.containsKey("enable_thinking")) {
        return kwargs;
      }
      Map<String, Object> out = new LinkedHashMap<>(kwargs == null ? Map.of() : kwargs);
      out.put("enable_thinking", !effort.equals("none"));
      return Collections.unmodifiableMap(out);
    }

    /**
     * The chat prompt vLLM renders for a Responses request (non-Harmony {@code render_responses}): messages from
     * {@link ResponsesInput}, tools from {@link Tools#responses}, the kwargs of {@code ResponsesRequest
     * .build_chat_params} and the tokenization of {@code build_tok_params}.
     */
    private ChatPrompt responsesPrompt() throws BadRequest {
      if (promptTemplate != null) {
        throw bad("prompt template is not supported", "prompt"); // ResponsesRequest.validate_prompt
      }
      if (!inputPresent) {
        throw bad("`input` is required", "input");
      }
      String instr = stringOrNull(instructions, "instructions");
      if (toolsPresent && tools == null) {
        throw bad("`tools` must be a list", "tools"); // list[Tool] with a default, not Optional
      }
      Tools.Normalized t = Tools.responses(tools, toolChoicePresent ? toolChoice : "auto");
      ResponsesInput.Converted conv = ResponsesInput.convert(instr, input);
      if (reasoning != null && !(reasoning instanceof Map)) {
        throw bad("`reasoning` must be an object", "reasoning");
      }
      String effort = reasoning == null ? null : stringOrNull(((Map<?, ?>) reasoning).get("effort"),
          "reasoning.effort");
      Map<String, Object> kwargs = thinkingFromEffort(mapOrNull(chatTemplateKwargs, "chat_template_kwargs"), effort);
      Integer truncate;
      if (!truncationPresent || "disabled".equals(truncation)) {
        truncate = null;
      } else if (truncation == null || "auto".equals(truncation)) {
        // build_tok_params truncates whenever truncation != "disabled" (a null included): to the longest input the
        // context leaves room for
        truncate = -1;
      } else {
        throw bad("`truncation` must be 'auto' or 'disabled'", "truncation");
      }
      boolean cfm = conv.continueFinalMessage();
      if (previousResponseId != null || previousResponse != null) {
        responsesUnreproducible = InferenceRequest.RESPONSES_STORED;
      } else if (PythonValues.truthy(previousInputMessages)) {
        responsesUnreproducible = InferenceRequest.RESPONSES_PREVIOUS_INPUT;
      } else if (conv.unreproducible() != null) {
        responsesUnreproducible = conv.unreproducible();
      } else {
        responsesUnreproducible = inputMedia == null ? null : inputMedia.unreproducible;
      }
      // TokenizeParams' add_special_tokens defaults to true and build_tok_params leaves it so
      return new ChatPrompt(conv.messages(), t.tools(), t.toolChoice(), null, !cfm, cfm, kwargs, effort, null, true,
          truncate, null, mapOrNull(mmProcessorKwargs, "mm_processor_kwargs"));
    }

    private static List<MultimodalItem> mediaItems(List<MultimodalItem> items, Map<String, Object> mmKwargs) {
      if (mmKwargs != null && PythonValues.truthy(mmKwargs.get("use_audio_in_video"))) {
        return Messages.withAudioFromVideo(items);
      }
      return items;
    }

    private OutputSpec output() {
      int max;
      Long mct = PythonValues.laxLong(maxCompletionTokens);
      if (kind == Kind.RESPONSES) {
        Long mot = PythonValues.laxLong(maxOutputTokens);
        max = mot == null ? -1 : clamp(mot);
      } else if (kind == Kind.CHAT && mct != null) {
        max = clamp(mct);
      } else if (maxTokensPresent) {
        Long mt = PythonValues.laxLong(maxTokens);
        max = mt == null ? -1 : clamp(mt);
      } else {
        max = kind == Kind.COMPLETIONS ? OutputSpec.COMPLETIONS_DEFAULT_MAX_TOKENS : -1;
      }
      Long min = PythonValues.laxLong(minTokens);
      Long nn = PythonValues.laxLong(n);
      Long best = PythonValues.laxLong(bestOf);
      return new OutputSpec(max < 0 ? -1 : max, min == null || min < 0 ? 0 : clamp(min),
          Boolean.TRUE.equals(PythonValues.laxBool(ignoreEos)), nn == null || nn < 1 ? 1 : clamp(nn),
          best == null || best < 1 ? 0 : clamp(best));
    }

    private Integer truncatePromptTokens() throws BadRequest {
      if (truncatePromptTokens == null) {
        return null;
      }
      Long v = PythonValues.laxLong(truncatePromptTokens);
      if (v == null || v < -1) {
        throw bad("`truncate_prompt_tokens` must be an integer >= -1", "truncate_prompt_tokens");
      }
      return clamp(v);
    }

    /** vLLM 0.33.0's {@code truncation_side: Literal["left", "right"] | None} (chat and completions requests). */
    private String truncationSide() throws BadRequest {
      if (truncationSide == null || "left".equals(truncationSide) || "right".equals(truncationSide)) {
        return (String) truncationSide;
      }
      throw bad("`truncation_side` must be 'left' or 'right'", "truncation_side");
    }

    private List<Map<String, Object>> documents() throws BadRequest {
      if (documents == null) {
        return null;
      }
      if (!(documents instanceof List<?> l)) {
        throw bad("`documents` must be a list of objects with string values", "documents");
      }
      List<Map<String, Object>> out = new ArrayList<>(l.size());
      for (Object d : l) {
        if (!(d instanceof Map<?, ?> m) || !m.values().stream().allMatch(x -> x instanceof String)) {
          throw bad("`documents` must be a list of objects with string values", "documents");
        }
        out.add(cast(m));
      }
      return Collections.unmodifiableList(out);
    }

    private static boolean bool(String param, boolean present, Object raw, boolean dflt) throws BadRequest {
      if (!present) {
        return dflt;
      }
      Boolean b = PythonValues.laxBool(raw);
      if (b == null) {
        throw bad("`" + param + "` must be a boolean", param);
      }
      return b;
    }

    private static Map<String, Object> mapOrNull(Object raw, String param) throws BadRequest {
      if (raw == null) {
        return null;
      }
      if (raw instanceof Map<?, ?> m) {
        return cast(m);
      }
      throw bad("`" + param + "` must be an object", param);
    }

    private static String stringOrNull(Object raw, String param) throws BadRequest {
      if (raw == null || raw instanceof String) {
        return (String) raw;
      }
      throw bad("`" + param + "` must be a string", param);
    }

    private static int clamp(long v) {
      return (int) Math.max(Integer.MIN_VALUE, Math.min(Integer.MAX_VALUE, v));
    }
  }

  @SuppressWarnings("unchecked")
  static Map<String, Object> cast(Map<?, ?> m) {
    return (Map<String, Object>) m;
  }

  /** Completions prompts, streamed straight into strings and int arrays. */
  static final class Prompts {
    private Prompts() {}

    static List<CompletionPrompt.Input> read(JsonParser p, JsonToken v) throws IOException, BadRequest {
      switch (v) {
        case VALUE_NULL -> {
          return null;
        }
        case VALUE_STRING -> {
          return List.of(new CompletionPrompt.Text(p.getText()));
        }
        case START_ARRAY -> {
          JsonToken t = p.nextToken();
          if (t == JsonToken.END_ARRAY) {
            throw bad("`prompt` must not be an empty list", "prompt");
          }
          List<CompletionPrompt.Input> out = new ArrayList<>();
          if (t == JsonToken.VALUE_STRING) {
            do {
              if (t != JsonToken.VALUE_STRING) {
                throw bad(PROMPT_SHAPES, "prompt");
              }
              out.add(new CompletionPrompt.Text(p.getText()));
            } while ((t = p.nextToken()) != JsonToken.END_ARRAY);
          } else if (t == JsonToken.VALUE_NUMBER_INT || t == JsonToken.VALUE_NUMBER_FLOAT) {
            out.add(new CompletionPrompt.Tokens(tokens(p, t, "prompt")));
          } else if (t == JsonToken.START_ARRAY) {
            int i = 0;
            do {
              if (t != JsonToken.START_ARRAY) {
                throw bad(PROMPT_SHAPES, "prompt");
              }
              JsonToken first = p.nextToken();
              if (first == JsonToken.END_ARRAY) {
                throw bad("`prompt[" + i + "]` must not be empty", "prompt");
              }
              out.add(new CompletionPrompt.Tokens(tokens(p, first, "prompt[" + i + "]")));
              i++;
            } while ((t = p.nextToken()) != JsonToken.END_ARRAY);
          } else {
            throw bad(PROMPT_SHAPES, "prompt");
          }
          return out;
        }
        default -> throw bad(PROMPT_SHAPES, "prompt");
      }
    }

    /** Reads token ids from the current (first) one through the closing bracket. */
    private static TokenIds tokens(JsonParser p, JsonToken t, String where) throws IOException, BadRequest {
      int[] buf = new int[256];
      int n = 0;
      while (t != JsonToken.END_ARRAY) {
        int id;
        if (t == JsonToken.VALUE_NUMBER_INT && p.getNumberType() == JsonParser.NumberType.INT) {
          id = p.getIntValue();
        } else if (t == JsonToken.VALUE_NUMBER_FLOAT) {
          // pydantic's lax int accepts integral floats (1.0)
          double d = p.getDoubleValue();
          id = d == Math.rint(d) && d >= 0 && d <= Integer.MAX_VALUE ? (int) d : -1;
        } else if (t == JsonToken.VALUE_NUMBER_INT) {
          id = -1; // beyond 32 bits: no vocabulary is that large
        } else {
          throw bad("`" + where + "` mixes token ids with other values; " + PROMPT_SHAPES, "prompt");
        }
        if (id < 0) {
          throw bad("`" + where + "` holds a token id outside 0.." + Integer.MAX_VALUE, "prompt");
        }
        if (n == buf.length) {
          buf = java.util.Arrays.copyOf(buf, n * 2);
        }
        buf[n++] = id;
        t = p.nextToken();
      }
      return TokenIds.wrap(buf, n);
    }
  }

  /** The names vLLM maps to content-part parsers ({@code MM_PARSER_MAP}), plus the text-only ones. */
  static final Set<String> KNOWN_PART_TYPES = Set.of("text", "thinking", "input_text", "output_text", "refusal",
      "tool_reference", "input_image", "image_url", "image_embeds", "audio_embeds", "video_embeds", "prompt_embeds",
      "image_pil",
      "audio_url", "input_audio", "video_url");

  /** Messages with their media items, read in one pass. */
  static final class Messages {
    final List<Map<String, Object>> list;
    final List<MultimodalItem> items;
    final String unreproducible;

    private Messages(List<Map<String, Object>> list, List<MultimodalItem> items, String unreproducible) {
      this.list = list;
      this.items = items;
      this.unreproducible = unreproducible;
    }

    /** Reads the array whose {@code START_ARRAY} is current, in {@code body}. */
    static Messages read(JsonParser p, byte[] body, int length) throws IOException, BadRequest {
      List<Map<String, Object>> list = new ArrayList<>();
      MediaParts media = new MediaParts(body, length);
      JsonToken t;
      int i = 0;
      while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
        if (t != JsonToken.START_OBJECT) {
          throw bad("`messages[" + i + "]` must be an object", "messages[" + i + "]");
        }
        Map<String, Object> m = new LinkedHashMap<>();
        String before = media.unreproducible;
        while (p.nextToken() == JsonToken.FIELD_NAME) {
          String k = p.currentName();
          JsonToken v = p.nextToken();
          if (k.equals("content")) {
            media.startContent(before);
            m.put(k, v == JsonToken.START_ARRAY ? media.readParts(p, i) : JsonValues.read(p, v));
          } else {
            m.put(k, JsonValues.read(p, v));
          }
        }
        if (!(m.get("role") instanceof String)) {
          throw bad("`messages[" + i + "].role` must be a string", "messages[" + i + "].role");
        }
        Object content = m.get("content");
        if (content != null && !(content instanceof String) && !(content instanceof List)) {
          throw bad("`messages[" + i + "].content` must be a string, a list of content parts or null",
              "messages[" + i + "].content");
        }
        media.endMessage();
        list.add(Collections.unmodifiableMap(m));
        i++;
      }
      return new Messages(Collections.unmodifiableList(list), media.items(), media.unreproducible);
    }

    /** vLLM's {@code use_audio_in_video}: every video also feeds its audio track, with the same uuid. */
    static List<MultimodalItem> withAudioFromVideo(List<MultimodalItem> items) {
      List<MultimodalItem> out = new ArrayList<>(items.size() * 2);
      for (MultimodalItem it : items) {
        out.add(new MultimodalItem(out.size(), it.modality(), it.identifier(), it.clientUuid(), it.message(),
            it.part()));
        if (it.modality() == MultimodalItem.Modality.VIDEO) {
          String id = it.clientUuid() ? it.identifier() : it.identifier().replace(":video:", ":audio:");
          out.add(new MultimodalItem(out.size(), MultimodalItem.Modality.AUDIO, id, it.clientUuid(), it.message(),
              it.part()));
        }
      }
      return List.copyOf(out);
    }
  }
}
