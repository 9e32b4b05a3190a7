package dev.kvrouter.extproc.server;

import com.google.protobuf.ByteString;
import dev.kvrouter.extproc.routing.Decision;

/**
 * Hooks into one request's life after routing: load accounting, truth checks and decision records listen here.
 * All calls for one request come one at a time, in order: from the routing stream, then from the response
 * observer; when the observer leaves after the first chunk, {@link #onObserverLeft} and {@link #onEnd} come from
 * the routing stream, ordered after the observer's calls by {@link Exchange}'s atomic hand-over.
 */
public interface RequestListener {

  RequestListener NONE = new RequestListener() {};

  /** The router decided (routed or rejected). */
  default void onDecision(Decision decision) {}

  /**
   * The router answered a request itself before any decision: a bad or oversized body, a tenant's POST to a path it
   * does not route, its own failure. {@code reason} is a closed vocabulary token ({@code bad_request},
   * {@code body_too_large}, {@code empty_body}, {@code tenant_path_not_routed}, {@code tenant_body_mode},
   * {@code tenant_not_utf8}, {@code internal_error}).
   */
  default void onRefused(String reason) {}

  /**
   * Envoy closed the stream of a request still waiting for a routing thread (its {@code message_timeout} fired, or the
   * client left), so the router did not route it: Envoy sent it on unrouted.
   */
  default void onAbandoned() {}

  /**
   * A message the ext_proc protocol does not allow where it came (request headers or a request body after the stream
   * had them, ignored; request headers after a body that came before them, answered as they are), or a request body
   * or trailers before any headers (passed on unrouted); {@code message} is {@code request_headers},
   * {@code request_body}, {@code request_body_before_headers} or {@code request_trailers_before_headers}.
   */
  default void onUnexpectedMessage(String message) {}

  /** Response headers arrived from the worker. */
  default void onResponseHeaders(Decision decision, int status) {}

  /** A chunk of the response body; {@code first} on the first non-empty chunk. */
  default void onResponseBody(Decision decision, ByteString chunk, boolean first, boolean endOfStream) {}

  /**
   * The response observer stopped following this streamed response after its first chunk (outside the truth
   * check's sample), so its usage was not read; called right before {@link #onEnd}.
   */
  default void onObserverLeft(Decision decision) {}

  /** The request ended: completed, or aborted (client cancel, reset, error) when {@code aborted}. */
  default void onEnd(Decision decision, boolean aborted) {}
}
