package dev.kvrouter.extproc.server;

import com.google.protobuf.ByteString;
import dev.kvrouter.extproc.routing.Decision;

/**
 * Hooks into one request's life after routing: load accounting, truth checks and decision records listen here.
 * All calls for one request come from that request's stream, in order, one at a time.
 */
public interface RequestListener {

  RequestListener NONE = new RequestListener() {};

  /** The router decided (routed or rejected). */
  default void onDecision(Decision decision) {}

  /** Response headers arrived from the worker. */
  default void onResponseHeaders(Decision decision, int status) {}

  /** A chunk of the response body; {@code first} on the first non-empty chunk. */
  default void onResponseBody(Decision decision, ByteString chunk, boolean first, boolean endOfStream) {}

  /** The request ended: completed, or aborted (client cancel, reset, error) when {@code aborted}. */
  default void onEnd(Decision decision, boolean aborted) {}
}
