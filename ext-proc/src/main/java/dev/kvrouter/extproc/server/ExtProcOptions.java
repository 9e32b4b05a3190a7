package dev.kvrouter.extproc.server;

import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import java.util.List;
import java.util.Set;

/**
 * Settings of the ext_proc service (the {@code server} and {@code limits} parts of kvrouter.yaml).
 *
 * @param bind address to listen on (127.0.0.1 unless the router runs apart from Envoy)
 * @param port gRPC port (default 9002)
 * @param maxBodyBytes largest request body the router reads; larger bodies get 413
 * @param tenantHeader trusted header carrying the tenant id (Envoy strips it from clients), or null
 * @param defaultRequestBodyMode body mode assumed when Envoy does not send {@code protocol_config}
 * @param defaultResponseBodyMode likewise for responses
 * @param retryAfterSeconds {@code Retry-After} sent with 429 answers
 * @param threads routing threads for bodies routed off the event loop (default: available processors)
 * @param inlineRoutingMaxBytes bodies up to this size are routed on the gRPC event loop, larger ones on the
 *     routing threads (default 16 KiB: about 4k tokens, well under a millisecond of work)
 * @param truthCheckEvery the response observer follows one streamed response in this many to its end, where the
 *     usage for the truth check is; the others are left after their first chunk (default 16; 1: all, 0: none)
 * @param tenantPassThroughPaths POST paths (as {@link #passThroughPathError} accepts them) a request with a tenant
 *     may reach the engine on without the router's salt rewrite; a tenant's POST to any other path the router does
 *     not route is refused with 404 (default {@link #DEFAULT_TENANT_PASS_THROUGH_PATHS})
 * @param saltMessagesApi whether a tenant's Anthropic Messages request ({@code /v1/messages}) is routed and salted
 *     like chat (every worker's vLLM declares {@code cache_salt} on its Anthropic request model) or refused with 404
 *     (default: an engine whose model lacks the field drops the salt without a word)
 */
public record ExtProcOptions(
    String bind,
    int port,
    int maxBodyBytes,
    String tenantHeader,
    BodySendMode defaultRequestBodyMode,
    BodySendMode defaultResponseBodyMode,
    int retryAfterSeconds,
    int threads,
    int inlineRoutingMaxBytes,
    int truthCheckEvery,
    Set<String> tenantPassThroughPaths,
    boolean saltMessagesApi) {

  public static final int DEFAULT_PORT = 9002;
  public static final int DEFAULT_TRUTH_CHECK_EVERY = 16;

  /**
   * vLLM's tokenizer endpoints and the Messages API's token count (which Claude Code calls between turns): they read
   * a prompt but never touch the KV cache, so no salt is needed.
   */
  public static final List<String> DEFAULT_TENANT_PASS_THROUGH_PATHS = List.of("/tokenize", "/detokenize",
      "/v1/messages/count_tokens");

  public ExtProcOptions {
    tenantPassThroughPaths = Set.copyOf(tenantPassThroughPaths);
  }

  /** Tenants' Messages requests refused. */
  public ExtProcOptions(String bind, int port, int maxBodyBytes, String tenantHeader,
      BodySendMode defaultRequestBodyMode, BodySendMode defaultResponseBodyMode, int retryAfterSeconds, int threads,
      int inlineRoutingMaxBytes, int truthCheckEvery, Set<String> tenantPassThroughPaths) {
    this(bind, port, maxBodyBytes, tenantHeader, defaultRequestBodyMode, defaultResponseBodyMode, retryAfterSeconds,
        threads, inlineRoutingMaxBytes, truthCheckEvery, tenantPassThroughPaths, false);
  }

  /** With the default tenant pass-through paths. */
  public ExtProcOptions(String bind, int port, int maxBodyBytes, String tenantHeader,
      BodySendMode defaultRequestBodyMode, BodySendMode defaultResponseBodyMode, int retryAfterSeconds, int threads,
      int inlineRoutingMaxBytes, int truthCheckEvery) {
    this(bind, port, maxBodyBytes, tenantHeader, defaultRequestBodyMode, defaultResponseBodyMode, retryAfterSeconds,
        threads, inlineRoutingMaxBytes, truthCheckEvery, Set.copyOf(DEFAULT_TENANT_PASS_THROUGH_PATHS));
  }

  /**
   * Why {@code path} cannot be a tenant pass-through path, or null when it can: it must be a path as the router
   * compares it (starting with {@code /}, no query, escapes, repeated or trailing slash), and not one the router
   * routes itself.
   */
  public static String passThroughPathError(String path) {
    if (path == null || !path.startsWith("/")) {
      return "must be a path starting with /";
    }
    if (!path.equals(RequestStream.normalizedPath(path))) {
      return "`" + path + "` must be written as the router compares it: no query, %-escape, repeated or trailing"
          + " slash";
    }
    if (RequestStream.inferenceKind("POST", path) != null) {
      return "`" + path + "` is routed (and salted) by the router; it cannot pass through";
    }
    return null;
  }

  public static ExtProcOptions defaults() {
    return new ExtProcOptions("127.0.0.1", DEFAULT_PORT, 8 * 1024 * 1024, "x-tenant-id", BodySendMode.BUFFERED,
        BodySendMode.STREAMED, 1, Runtime.getRuntime().availableProcessors(), 16 * 1024, DEFAULT_TRUTH_CHECK_EVERY);
  }

  public ExtProcOptions withPort(int p) {
    return new ExtProcOptions(bind, p, maxBodyBytes, tenantHeader, defaultRequestBodyMode, defaultResponseBodyMode,
        retryAfterSeconds, threads, inlineRoutingMaxBytes, truthCheckEvery, tenantPassThroughPaths);
  }
}
