package dev.kvrouter.extproc.server;

import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;

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
    int truthCheckEvery) {

  public static final int DEFAULT_PORT = 9002;
  public static final int DEFAULT_TRUTH_CHECK_EVERY = 16;

  public static ExtProcOptions defaults() {
    return new ExtProcOptions("127.0.0.1", DEFAULT_PORT, 8 * 1024 * 1024, "x-tenant-id", BodySendMode.BUFFERED,
        BodySendMode.STREAMED, 1, Runtime.getRuntime().availableProcessors(), 16 * 1024, DEFAULT_TRUTH_CHECK_EVERY);
  }

  public ExtProcOptions withPort(int p) {
    return new ExtProcOptions(bind, p, maxBodyBytes, tenantHeader, defaultRequestBodyMode, defaultResponseBodyMode,
        retryAfterSeconds, threads, inlineRoutingMaxBytes, truthCheckEvery);
  }
}
