package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.sim.engine.MediaSpan;
import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import java.util.List;

/**
 * A validated OpenAI request, reduced to what the simulated engine needs.
 *
 * @param kind the endpoint: {@code /v1/completions}, {@code /v1/chat/completions}, {@code /v1/responses} or
 *     {@code /v1/messages}
 * @param model the {@code model} field as sent (reported back in responses)
 * @param adapter the LoRA adapter when {@code model} names one, else {@code null}
 * @param prompts token ids of each prompt (completions may batch several; the chat-like endpoints have one)
 * @param maxTokens tokens to generate per prompt
 * @param stream SSE streaming
 * @param includeUsage {@code stream_options.include_usage}
 * @param cacheSalt vLLM's {@code cache_salt}, or {@code null}
 * @param seed the request's {@code seed}, or 0
 * @param seeded whether the request carried a {@code seed}
 * @param ignoreEos vLLM's {@code ignore_eos}: the model's end of turn does not stop the generation
 * @param answerWords a scripted answer's length in words ({@code vllm_xargs.answer_words}), or 0: then
 *     {@code maxTokens} names it ({@link ScriptedChatAnswers})
 * @param media the chat prompt's media items by position (empty for text and for completions)
 * @param response for {@code /v1/responses}, the response object's fields that come from the request, in vLLM's
 *     order ({@code ResponsesResponse.from_request}), its {@code id} the request's {@code request_id}; else null
 * @param toolScript for {@code /v1/messages} on a scripted worker, the tool-call answer the request scripts in
 *     {@code vllm_xargs} as the model generates it; else null
 */
record ApiRequest(Kind kind, String model, String adapter, List<int[]> prompts, int maxTokens, boolean stream,
    boolean includeUsage, String cacheSalt, long seed, boolean seeded, boolean ignoreEos, int answerWords,
    List<MediaSpan> media, ObjectNode response, ToolCallScript toolScript) {

  /** A chat completion (not a Responses or Messages request, whose prompts are also chats). */
  boolean chat() {
    return kind == Kind.CHAT;
  }

  boolean responses() {
    return kind == Kind.RESPONSES;
  }

  boolean messages() {
    return kind == Kind.MESSAGES;
  }
}
