package dev.kvrouter.extproc.request;

/**
 * What the router needs from an OpenAI request body to route it. The full prompt model (messages, tools,
 * content parts, token ids) is parsed by the request path; this record is the part every policy sees.
 *
 * @param kind completions or chat completions
 * @param model the requested model or adapter name
 * @param stream whether the client asked for SSE streaming
 * @param cacheSalt the client's {@code cache_salt}, or null
 * @param maxTokens {@code max_completion_tokens} or {@code max_tokens}, or -1 when absent
 */
public record InferenceRequest(Kind kind, String model, boolean stream, String cacheSalt, int maxTokens) {

  public enum Kind {
    COMPLETIONS,
    CHAT
  }
}
