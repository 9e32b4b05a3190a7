package dev.kvrouter.examples.sim.http;

import dev.kvrouter.examples.sim.engine.MediaSpan;
import java.util.List;

/**
 * A validated OpenAI request, reduced to what the simulated engine needs.
 *
 * @param chat true for {@code /v1/chat/completions}
 * @param model the {@code model} field as sent (reported back in responses)
 * @param adapter the LoRA adapter when {@code model} names one, else {@code null}
 * @param prompts token ids of each prompt (completions may batch several; chat has one)
 * @param maxTokens tokens to generate per prompt
 * @param stream SSE streaming
 * @param includeUsage {@code stream_options.include_usage}
 * @param cacheSalt vLLM's {@code cache_salt}, or {@code null}
 * @param seed the request's {@code seed}, or 0
 * @param seeded whether the request carried a {@code seed}
 * @param media the chat prompt's media items by position (empty for text and for completions)
 */
record ApiRequest(boolean chat, String model, String adapter, List<int[]> prompts, int maxTokens, boolean stream,
    boolean includeUsage, String cacheSalt, long seed, boolean seeded, List<MediaSpan> media) {}
