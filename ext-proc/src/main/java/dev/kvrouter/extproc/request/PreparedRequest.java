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
}
