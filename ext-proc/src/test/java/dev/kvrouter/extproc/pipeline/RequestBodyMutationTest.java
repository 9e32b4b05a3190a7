package dev.kvrouter.extproc.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.request.ErrorShape;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.OpenAiError;
import dev.kvrouter.extproc.request.PreparedRequest;
import dev.kvrouter.extproc.request.RequestBodyParser;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A body with a value of any type anywhere, a key missing or a list emptied must come out of the request path as a 400
 * or as a prompt (or a named reason to route by load), never as an exception past the parser (the stream's 500) or as
 * the pipeline's catch-all {@code tokenizer_error}: the Messages and Responses conversions read untyped JSON trees, so
 * a cast or a null lookup they did not guard fails there. Seeded mutations of a Claude-Code-like Messages body and of
 * chat and Responses bodies of the same shape, through the real Qwen3 (keeps inline system messages) and DeepSeek V3
 * (folds them) templates. It found a Messages message without a role answered with a 500. Each refusal must also be
 * written in the shape the body's API client parses (Anthropic's error object for a Messages body).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RequestBodyMutationTest {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final JsonNodeFactory F = JsonNodeFactory.instance;
  private static final int MUTANTS = 1_500;

  ModelRegistry registry;
  RequestPreparer preparer;
  PromptPipeline pipeline;

  @BeforeAll
  void load() throws Exception {
    registry = PipelineFixtures.registry(16);
    preparer = PipelineFixtures.preparer(registry);
    pipeline = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, false,
        new SimpleMeterRegistry());
  }

  @AfterAll
  void close() {
    registry.close();
  }

  @ParameterizedTest
  @EnumSource(value = InferenceRequest.Kind.class, names = {"MESSAGES", "CHAT", "RESPONSES"})
  void everyMutantIsRefusedOrPrepared(InferenceRequest.Kind kind) throws Exception {
    SplittableRandom rnd = new SplittableRandom(20261202 + kind.ordinal());
    int refused = 0;
    int prompts = 0;
    List<String> failures = new ArrayList<>();
    for (int i = 0; i < MUTANTS; i++) {
      String model = i % 2 == 0 ? "qwen3" : "deepseek_v3";
      ObjectNode body = body(kind, model);
      int edits = 1 + rnd.nextInt(3);
      for (int e = 0; e < edits; e++) {
        mutate(body, rnd);
      }
      body.put("model", model);
      byte[] bytes = JSON.writeValueAsBytes(body);
      PreparedRequest prepared;
      try {
        prepared = preparer.prepare(kind, bytes, bytes.length, null);
      } catch (RequestBodyParser.BadRequest expected) {
        refused++;
        String shape = refusalShapeProblem(kind, expected.error());
        if (shape != null) {
          failures.add("#" + i + " refusal: " + shape);
        }
        continue;
      } catch (RuntimeException ex) {
        failures.add("#" + i + " parse: " + ex);
        continue;
      }
      PromptPipeline.Outcome out = pipeline.run(prepared);
      if ("tokenizer_error".equals(out.unavailable())) {
        failures.add("#" + i + " pipeline: " + new String(bytes, StandardCharsets.UTF_8));
      } else if (out.prompt() != null) {
        prompts++;
      }
    }
    assertThat(failures).isEmpty();
    // the mutations must exercise both outcomes, or the test says nothing
    assertThat(refused).as("refused").isGreaterThan(MUTANTS / 10);
    assertThat(prompts).as("prepared into a prompt").isGreaterThan(MUTANTS / 10);
  }

  /**
   * Why the 400 a client of {@code kind}'s API gets is not in the shape its SDK parses (Anthropic's for a Messages
   * body, OpenAI's otherwise), or null.
   */
  private static String refusalShapeProblem(InferenceRequest.Kind kind, OpenAiError error) throws Exception {
    String path = switch (kind) {
      case MESSAGES -> "/v1/messages";
      case RESPONSES -> "/v1/responses";
      default -> "/v1/chat/completions";
    };
    JsonNode body = JSON.readTree(ErrorShape.forPath(path).body(error));
    boolean ok = error.status() == 400 && (kind == InferenceRequest.Kind.MESSAGES
        ? body.path("type").asText().equals("error") && body.path("error").path("type").asText()
            .equals("BadRequestError") && body.path("error").path("message").isTextual()
        : body.path("error").path("type").asText().equals("invalid_request_error"));
    return ok ? null : error.status() + " " + body;
  }

  private static ObjectNode body(InferenceRequest.Kind kind, String model) throws Exception {
    if (kind == InferenceRequest.Kind.CHAT) {
      return (ObjectNode) JSON.readTree("""
          {"model": "%s", "max_tokens": 64, "reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": true},
           "tools": [{"type": "function", "function": {"name": "read", "description": "d", "parameters": {}}}],
           "tool_choice": "auto",
           "messages": [{"role": "system", "content": "x-anthropic-billing-header: cch=1;\\nYou code."},
             {"role": "user", "content": [{"type": "text", "text": "Fix it"}]},
             {"role": "assistant", "content": null, "reasoning": "r", "tool_calls": [{"id": "c1", "type": "function",
               "function": {"name": "read", "arguments": "{\\"path\\": \\"a\\"}"}}]},
             {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "code"}]},
             {"role": "user", "content": "go on"}]}
          """.formatted(model));
    }
    if (kind == InferenceRequest.Kind.RESPONSES) {
      return (ObjectNode) JSON.readTree("""
          {"model": "%s", "instructions": "Be brief.", "reasoning": {"effort": "low"},
           "tools": [{"type": "function", "name": "read", "parameters": {}, "strict": true}],
           "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix it"}]},
             {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}]},
             {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "code"},
             {"role": "user", "content": "go on"}]}
          """.formatted(model));
    }
    return (ObjectNode) JSON.readTree("""
        {"model": "%s", "max_tokens": 4096, "stream": true,
         "system": [{"type": "text", "text": "x-anthropic-billing-header: cch=1;"},
                    {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}],
         "tools": [{"name": "read", "description": "Read a file", "input_schema": {"type": "object",
                    "properties": {"path": {"type": "string"}}}, "strict": true}],
         "tool_choice": {"type": "auto"},
         "thinking": {"type": "enabled", "budget_tokens": 1024},
         "output_config": {"effort": "high"},
         "chat_template_kwargs": {"enable_thinking": true},
         "messages": [
           {"role": "user", "content": [{"type": "text", "text": "Fix it"}]},
           {"role": "assistant", "content": [{"type": "thinking", "thinking": "look", "signature": "s"},
             {"type": "text", "text": "Reading."},
             {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.py"}}]},
           {"role": "system", "content": "reminder between"},
           {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
             "content": [{"type": "text", "text": "code"}, {"type": "tool_reference", "tool_name": "read"}]},
             {"type": "text", "text": "go on"}]},
           {"role": "assistant", "content": "Done."},
           {"role": "system", "content": [{"type": "text", "text": "reminder at the end"}]}]}
        """.formatted(model));
  }

  /** Replaces a random node with a random value, drops a random key, or empties a random list. */
  private static void mutate(JsonNode root, SplittableRandom rnd) {
    List<JsonNode> containers = new ArrayList<>();
    collect(root, containers);
    JsonNode target = containers.get(rnd.nextInt(containers.size()));
    if (target instanceof ObjectNode o && o.size() > 0) {
      List<String> names = new ArrayList<>();
      o.fieldNames().forEachRemaining(names::add);
      String name = names.get(rnd.nextInt(names.size()));
      if (rnd.nextInt(4) == 0) {
        o.remove(name);
      } else {
        o.set(name, randomValue(rnd));
      }
    } else if (target instanceof ArrayNode a && a.size() > 0) {
      if (rnd.nextInt(4) == 0) {
        a.removeAll();
      } else {
        a.set(rnd.nextInt(a.size()), randomValue(rnd));
      }
    }
  }

  private static void collect(JsonNode n, List<JsonNode> out) {
    if (n.isContainerNode()) {
      out.add(n);
      n.elements().forEachRemaining(c -> collect(c, out));
    }
  }

  private static JsonNode randomValue(SplittableRandom rnd) {
    return switch (rnd.nextInt(9)) {
      case 0 -> F.nullNode();
      case 1 -> F.numberNode(rnd.nextInt(-3, 2000));
      case 2 -> F.numberNode(rnd.nextDouble() * 10);
      case 3 -> F.booleanNode(rnd.nextBoolean());
      case 4 -> F.textNode(List.of("", "text", "image", "tool_use", "tool_result", "system", "user", "assistant",
          "x-anthropic-billing-header", "none", "disabled", "any", "tool").get(rnd.nextInt(13)));
      case 5 -> F.arrayNode();
      case 6 -> F.arrayNode().add(F.objectNode().put("type", "text").put("text", "t")).add(5);
      case 7 -> F.objectNode();
      default -> F.objectNode().put("type", List.of("text", "image", "tool_result", "tool_use", "thinking",
          "disabled", "tool").get(rnd.nextInt(7))).put("name", "read").set("content", F.arrayNode().add("x"));
    };
  }
}
