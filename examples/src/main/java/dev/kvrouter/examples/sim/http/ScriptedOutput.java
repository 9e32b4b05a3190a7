package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvrouter.examples.sim.engine.OutputTokens;
import dev.kvrouter.examples.workload.TokenSpace;
import java.util.Objects;

/**
 * The worker's output when the client scripts it: a request that carries the OpenAI {@code seed} generates
 * {@link TokenSpace#token}{@code (seed, i)}, i.e. the answer a workload scripted under that seed
 * ({@code WorkloadRequest.answer}), token for token. The answer is then a pure function of the request, as with
 * greedy decoding or a seeded sampler, and equal on every worker, which is what the virtual-time A/B's engines do;
 * through HTTP it lets a closed-loop client resend the model's own answer and find its decode-filled KV blocks
 * on the worker that generated it.
 *
 * <p>A request without {@code seed} keeps the default's output seed (the prompt hashed under seed 0), drawn from
 * the same token space. Every generated token is rendered as {@code token_id:<id>}, vLLM's rendering under
 * {@code return_tokens_as_token_ids}, so every chunk carries content (most ids of the space are outside the
 * readable output vocabulary) and a client can read the ids back.
 *
 * <p>Off by default ({@code kvrouter-sim --output-tokens model}): the quickstart, the e2e tests and chat
 * workloads keep the readable output vocabulary.
 *
 * @param space the token ids the workload draws from ({@code vocab=lo..hi} of its spec)
 */
public record ScriptedOutput(TokenSpace space) {

  public ScriptedOutput {
    Objects.requireNonNull(space, "space");
  }

  /**
   * Parses {@code model} (off: returns null), {@code workload} (the default token space, 1000..128000) or
   * {@code workload:LO..HI}.
   */
  public static ScriptedOutput parse(String s) {
    String v = s == null ? "model" : s.trim();
    if (v.equals("model")) {
      return null;
    }
    if (v.equals("workload")) {
      return new ScriptedOutput(TokenSpace.DEFAULT);
    }
    if (v.startsWith("workload:")) {
      return new ScriptedOutput(TokenSpace.parse(v.substring("workload:".length())));
    }
    throw new IllegalArgumentException("output tokens must be model, workload or workload:LO..HI, was " + s);
  }

  /** The engine's output model. */
  public OutputTokens tokens() {
    return space::token;
  }

  /** The output seed of a request: its {@code seed} when it carries one, else the default's. */
  long outputSeed(ApiRequest req, long defaultSeed) {
    return req.seeded() ? req.seed() : defaultSeed;
  }

  /** {@code encoder} with every generated token rendered as {@code token_id:<id>}. */
  PromptEncoder rendering(PromptEncoder encoder) {
    return new PromptEncoder() {
      @Override
      public int[] encodeCompletion(String prompt) {
        return encoder.encodeCompletion(prompt);
      }

      @Override
      public int[] encodeChat(JsonNode request) {
        return encoder.encodeChat(request);
      }

      @Override
      public ChatTokens encodeChatPrompt(JsonNode request) {
        return encoder.encodeChatPrompt(request);
      }

      @Override
      public ChatTokens encodeResponsesPrompt(JsonNode request) {
        return encoder.encodeResponsesPrompt(request);
      }

      @Override
      public ChatTokens encodeMessagesPrompt(JsonNode request) {
        return encoder.encodeMessagesPrompt(request);
      }

      @Override
      public String tokenText(int tokenId) {
        return "token_id:" + tokenId;
      }

      @Override
      public int[] outputVocabulary() {
        return encoder.outputVocabulary();
      }
    };
  }

  @Override
  public String toString() {
    return "workload:" + space;
  }
}
