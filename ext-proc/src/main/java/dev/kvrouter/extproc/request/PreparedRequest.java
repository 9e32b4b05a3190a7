package dev.kvrouter.extproc.request;

import java.util.Objects;

/**
 * A request ready for routing: the parsed body, its scope, and whether the body the engine receives must differ
 * from the client's (a rewritten {@code cache_salt}).
 *
 * @param request the parsed body
 * @param scope model, namespace and tenant pseudonym
 * @param parseNanos time spent parsing and resolving (the decision record's {@code parse} timing)
 */
public record PreparedRequest(InferenceRequest request, RequestScope scope, long parseNanos) {

  public PreparedRequest {
    Objects.requireNonNull(request, "request");
    Objects.requireNonNull(scope, "scope");
  }

  /** True when the engine must receive a different {@code cache_salt} than the client sent. */
  public boolean rewritesBody() {
    String salt = scope.effectiveSalt();
    return salt != null && !salt.equals(request.cacheSalt());
  }

  /**
   * The body the engine must receive: the client's bytes with {@code cache_salt} set to the effective salt.
   * Call only when {@link #rewritesBody()}.
   */
  public byte[] rewriteBody(byte[] body, int length) {
    return CacheSaltRewriter.rewrite(body, length, request.saltSites(), scope.effectiveSalt());
  }

  /**
   * The {@code request_id} to write into a Responses API request routed to {@code worker}, so that the response's id
   * names it ({@link ResponseIds}); null when the client chose its own, or for the other kinds.
   */
  public String responseIdFor(String worker) {
    InferenceRequest.ResponsesFields r = request.responses();
    return r == null || r.requestIdGiven() || !request.saltSites().known() ? null : ResponseIds.mint(worker);
  }

  /**
   * The body the engine must receive: the salt rewritten when {@link #rewritesBody()}, and {@code requestId} (from
   * {@link #responseIdFor}) added when not null. Call only when at least one of the two applies.
   */
  public byte[] upstreamBody(byte[] body, int length, String requestId) {
    boolean salted = rewritesBody();
    byte[] out = salted ? rewriteBody(body, length) : body;
    if (requestId == null) {
      return out;
    }
    CacheSaltSites sites = request.saltSites();
    // The salt splice only replaces values or inserts right after the brace, so the brace has not moved.
    return CacheSaltRewriter.insertField(out, salted ? out.length : length, sites.objectStart(),
        sites.fieldCount() > 0 || salted, "request_id", requestId);
  }
}
