package dev.kvrouter.extproc.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.extproc.model.InlineSystemMode;
import dev.kvrouter.extproc.model.MessagesDialect;
import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.PreparedRequest;
import dev.kvrouter.extproc.request.RequestBodyParser;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.index.block.BlockHasher;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The whole request path against the real libraries: each conversation of the template fixtures (rendered and
 * tokenized by Python transformers' {@code apply_chat_template(tokenize=True)}) is sent as an OpenAI chat body
 * through the request preparer and the prompt pipeline, and the block hashes the router computes must equal
 * {@link BlockHasher} over transformers' token ids: same text, same tokens, same blocks as the engine.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PromptPipelineGoldenTest {

  static final ObjectMapper JSON = new ObjectMapper();
  static final int BLOCK = 16;
  ModelRegistry registry;
  RequestPreparer preparer;
  /** Blocks of one token: the block hashes then compare every token, also those of a short prompt's last block. */
  ModelRegistry perToken;
  RequestPreparer perTokenPreparer;
  PromptPipeline pipeline;

  @BeforeAll
  void load() throws Exception {
    registry = PipelineFixtures.registry(BLOCK);
    preparer = PipelineFixtures.preparer(registry);
    perToken = PipelineFixtures.registry(1);
    perTokenPreparer = PipelineFixtures.preparer(perToken);
    pipeline = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, false,
        new SimpleMeterRegistry());
  }

  @AfterAll
  void close() {
    registry.close();
    perToken.close();
  }

  @ParameterizedTest
  @ValueSource(strings = {"qwen3", "llama3_1", "deepseek_v3", "gemma3"})
  void chatBodiesHashLikeTransformersTokenIds(String model) throws Exception {
    JsonNode fixture = fixture("tokenizer_" + model);
    int checked = 0;
    List<String> mismatches = new ArrayList<>();
    for (JsonNode c : fixture.path("cases")) {
      if (!c.hasNonNull("ids")) {
        continue; // the template raises for this conversation in Python: no ids to compare
      }
      if (!expressibleAsOpenAiRequest(c)) {
        continue; // template-level input no OpenAI client can send (vLLM answers 400 or drops it)
      }
      byte[] body = body(model, c);
      PreparedRequest prepared = preparer.prepare(InferenceRequest.Kind.CHAT, body, body.length, null);
      PromptPipeline.Outcome out = pipeline.run(prepared);
      int[] ids = JSON.convertValue(c.get("ids"), int[].class);
      long[] expected = BlockHasher.hashFullBlocks(prepared.scope().namespace().rootSeed(), ids, ids.length, BLOCK);
      if (out.prompt() == null) {
        mismatches.add(c.path("name").asText() + ": no prompt (" + out.unavailable() + ")");
      } else if (out.prompt().tokens() != ids.length
          || !java.util.Arrays.equals(out.prompt().blockHashes(), expected)) {
        mismatches.add(c.path("name").asText() + ": " + out.prompt().tokens() + " tokens vs " + ids.length);
      }
      checked++;
    }
    assertThat(mismatches).as(model).isEmpty();
    assertThat(checked).as("conversations checked for " + model).isGreaterThanOrEqualTo(40);
  }

  /**
   * Whole OpenAI bodies (the fixtures' {@code requests}): the ids are what vLLM prefills for them, its request
   * handling transcribed in scripts/fixtures/chat_templates.py ({@code vllm_prefill_ids}: vLLM 0.33.0's encode
   * kwargs and {@code _token_truncation} over transformers' tokenizer; chat messages as vLLM preprocesses them).
   * They cover Claude Code's billing header, empty content parts, and {@code truncate_prompt_tokens} with and
   * without {@code truncation_side}, where Hugging Face keeps BOS.
   */
  @ParameterizedTest
  @ValueSource(strings = {"qwen3", "llama3_1", "deepseek_v3", "gemma3"})
  void requestBodiesHashLikeVllmPrefill(String model) throws Exception {
    List<String> mismatches = new ArrayList<>();
    int checked = checkRequests(fixture("tokenizer_" + model), mismatches);
    assertThat(mismatches).as(model).isEmpty();
    assertThat(checked).as("request bodies checked for " + model).isGreaterThanOrEqualTo(4);
  }

  /**
   * {@code /v1/responses} bodies (scripts/fixtures/responses_templates.py): the messages and tools vLLM builds from
   * {@code instructions}, {@code input} and {@code tools} (written out from responses/utils.py) rendered by the real
   * template and tokenized with the Responses request's {@code add_special_tokens} (true). Covers instructions, a
   * string input, text parts, a typed assistant message, reasoning and function calls merged into one assistant
   * turn with their outputs as tool messages, a flat function tool, a partial last message, reasoning effort.
   */
  @ParameterizedTest
  @ValueSource(strings = {"qwen3"})
  void responsesBodiesHashLikeVllmPrefill(String model) throws Exception {
    JsonNode fixture = fixture("responses_" + model);
    List<String> mismatches = new ArrayList<>();
    int checked = checkRequests(fixture, mismatches);
    assertThat(mismatches).as(model).isEmpty();
    assertThat(checked).as("responses bodies checked for " + model).isGreaterThanOrEqualTo(5);
  }

  /**
   * {@code /v1/messages} bodies (scripts/fixtures/messages_templates.py): vLLM's Anthropic conversion
   * ({@code to_chat_completion_request}, {@code normalize_inline_system}) transcribed, with the inline-system mode its
   * renderer probe picks on the real tokenizer and template, rendered by transformers. Covers Claude Code's billing
   * header and inline system reminders (after tool results, between a tool use and its result, at the end), leading
   * system messages, thinking, tool use and results, tools and tool choice, effort and disabled thinking; Qwen3 and
   * Llama 3.1 keep inline system messages in place, DeepSeek V3 folds them; disabled thinking sends "none" to Qwen3
   * (whose template honours it, through enable_thinking) and "low" to the others.
   */
  @ParameterizedTest
  @ValueSource(strings = {"qwen3", "llama3_1", "deepseek_v3"})
  void messagesBodiesHashLikeVllmPrefill(String model) throws Exception {
    JsonNode fixture = fixture("messages_" + model);
    MessagesDialect probed = probedAsFixtureSays(model, fixture);
    assertThat(probed.disabledThinkingEffort()).as(model + ": the effort for disabled thinking")
        .isEqualTo(fixture.get("disabled_thinking_effort").asText());
    List<String> mismatches = new ArrayList<>();
    int checked = checkRequests(fixture, mismatches);
    assertThat(mismatches).as(model).isEmpty();
    assertThat(checked).as("messages bodies checked for " + model).isGreaterThanOrEqualTo(7);
  }

  /**
   * Seeded random {@code /v1/messages} bodies (scripts/fixtures/messages_random.py, a few hundred per model): system
   * strings and blocks with billing headers and empty blocks, leading and inline system messages anywhere, every
   * block type, tool results of every shape on user and assistant, tools, tool choice, efforts, thinking modes and
   * {@code chat_template_kwargs}, converted by the same transcription of vLLM as the hand-written bodies and rendered
   * by the real template. Each must reach vLLM's ids token for token; a body whose conversion or render raises there
   * (an empty conversation) must leave the router without a prompt, and one with an image must be routed by load.
   */
  @ParameterizedTest
  @ValueSource(strings = {"qwen3", "llama3_1", "deepseek_v3"})
  void randomMessagesBodiesHashLikeVllmPrefill(String model) throws Exception {
    JsonNode fixture = randomMessages().path("models").path(model);
    probedAsFixtureSays(model, fixture);
    List<String> mismatches = new ArrayList<>();
    int matched = 0;
    int refused = 0;
    int media = 0;
    int i = 0;
    for (JsonNode c : fixture.path("bodies")) {
      String name = model + "#" + i++;
      byte[] body = c.get("body").toString().getBytes(StandardCharsets.UTF_8);
      PreparedRequest prepared;
      try {
        prepared = perTokenPreparer.prepare(InferenceRequest.Kind.MESSAGES, body, body.length, null);
      } catch (RequestBodyParser.BadRequest e) {
        if (c.has("error")) {
          refused++;
        } else {
          mismatches.add(name + ": refused (" + e.getMessage() + ")");
        }
        continue;
      }
      PromptPipeline.Outcome out = pipeline.run(prepared);
      if (c.has("error")) {
        if (out.prompt() == null) {
          refused++;
        } else {
          mismatches.add(name + ": a prompt where vLLM fails with " + c.get("error"));
        }
      } else if (c.has("media")) {
        if (out.prompt() == null && InferenceRequest.MESSAGES_MEDIA.equals(out.unavailable())) {
          media++;
        } else {
          mismatches.add(name + ": an image body came out " + (out.prompt() == null ? out.unavailable() : "hashed"));
        }
      } else {
        String why = idsMismatch(prepared, out, c.get("ids"));
        if (why == null) {
          matched++;
        } else {
          mismatches.add(name + ": " + why);
        }
      }
    }
    assertThat(mismatches).as(model).isEmpty();
    assertThat(matched).as("random bodies matched for " + model).isGreaterThanOrEqualTo(250);
    assertThat(refused).as("bodies vLLM fails on, left without a prompt, for " + model).isPositive();
    assertThat(media).as("image bodies routed by load for " + model).isGreaterThanOrEqualTo(2);
  }

  private JsonNode randomMessages;

  private JsonNode randomMessages() throws java.io.IOException {
    if (randomMessages == null) {
      randomMessages = fixture("messages_random");
    }
    return randomMessages;
  }

  private int checkRequests(JsonNode fixture, List<String> mismatches) throws Exception {
    int checked = 0;
    for (JsonNode c : fixture.path("requests")) {
      byte[] body = c.get("body").toString().getBytes(StandardCharsets.UTF_8);
      InferenceRequest.Kind kind = switch (c.get("kind").asText()) {
        case "chat" -> InferenceRequest.Kind.CHAT;
        case "responses" -> InferenceRequest.Kind.RESPONSES;
        case "messages" -> InferenceRequest.Kind.MESSAGES;
        default -> InferenceRequest.Kind.COMPLETIONS;
      };
      PreparedRequest prepared = perTokenPreparer.prepare(kind, body, body.length, null);
      String why = idsMismatch(prepared, pipeline.run(prepared), c.get("ids"));
      if (why != null) {
        mismatches.add(c.get("name").asText() + ": " + why);
      }
      checked++;
    }
    return checked;
  }

  /**
   * Why the prompt the router hashed is not the one of vLLM's {@code ids} (one token per block, so every token is
   * compared), or null when they match.
   */
  private static String idsMismatch(PreparedRequest prepared, PromptPipeline.Outcome out, JsonNode idsNode) {
    int[] ids = JSON.convertValue(idsNode, int[].class);
    long[] expected = BlockHasher.hashFullBlocks(prepared.scope().namespace().rootSeed(), ids, ids.length, 1);
    if (out.prompt() == null) {
      return "no prompt (" + out.unavailable() + ")";
    }
    if (out.prompt().tokens() != ids.length) {
      return out.prompt().tokens() + " tokens vs " + ids.length + ", ids differ from token "
          + firstDifference(out.prompt().blockHashes(), expected);
    }
    if (!java.util.Arrays.equals(out.prompt().blockHashes(), expected)) {
      return "ids differ from token " + firstDifference(out.prompt().blockHashes(), expected);
    }
    return null;
  }

  /** The model's probed Messages dialect, whose inline-system placement must be the one the fixture was made with. */
  private MessagesDialect probedAsFixtureSays(String model, JsonNode fixture) {
    MessagesDialect probed = perToken.resolve(model).resources(PipelineResources.class).orElseThrow()
        .messagesDialect();
    assertThat(probed.inlineSystem()).as(model + ": " + fixture.path("probe_reason").asText())
        .isEqualTo(InlineSystemMode.valueOf(fixture.get("inline_system").asText().toUpperCase()));
    return probed;
  }

  private JsonNode fixture(String name) throws java.io.IOException {
    try (InputStream in = getClass().getResourceAsStream("/fixtures/templates/" + name + ".json")) {
      return JSON.readTree(in);
    }
  }

  private static int firstDifference(long[] a, long[] b) {
    int i = 0;
    while (i < Math.min(a.length, b.length) && a[i] == b[i]) {
      i++;
    }
    return i;
  }

  /**
   * Whether a client could send this conversation: message content must be a string, null or a list of
   * content parts, and media parts need their data (an {@code image_url} and so on), as vLLM's request model
   * requires.
   */
  static boolean expressibleAsOpenAiRequest(JsonNode c) {
    for (JsonNode m : c.path("messages")) {
      JsonNode content = m.get("content");
      if (content != null && !content.isNull() && !content.isTextual() && !content.isArray()) {
        return false;
      }
      if (content != null && content.isArray()) {
        for (JsonNode part : content) {
          String type = part.path("type").asText();
          if (!type.equals("text") && !part.has(type)) {
            return false;
          }
        }
      }
    }
    return true;
  }

  /**
   * The fixture conversation as the OpenAI chat request a vLLM client sends: the assistant's reasoning travels
   * in {@code reasoning}, which vLLM hands to templates as {@code reasoning_content} too.
   */
  static byte[] body(String model, JsonNode c) {
    ObjectNode b = JSON.createObjectNode();
    b.put("model", model);
    ArrayNode messages = b.putArray("messages");
    for (JsonNode m : c.path("messages")) {
      ObjectNode copy = m.deepCopy();
      if (copy.has("reasoning_content") && "assistant".equals(copy.path("role").asText())) {
        copy.set("reasoning", copy.remove("reasoning_content"));
      }
      messages.add(copy);
    }
    if (c.hasNonNull("tools")) {
      ArrayNode tools = b.putArray("tools");
      c.get("tools").forEach(tools::add);
    }
    if (c.hasNonNull("documents")) {
      b.set("documents", c.get("documents"));
    }
    b.put("add_generation_prompt", c.path("add_generation_prompt").asBoolean(true));
    b.put("continue_final_message", c.path("continue_final_message").asBoolean(false));
    JsonNode kwargs = c.path("kwargs");
    if (kwargs.isObject() && kwargs.size() > 0) {
      b.set("chat_template_kwargs", kwargs);
    }
    return b.toString().getBytes(StandardCharsets.UTF_8);
  }
}
