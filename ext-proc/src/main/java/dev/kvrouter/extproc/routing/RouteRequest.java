package dev.kvrouter.extproc.routing;

import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.RequestScope;

/**
 * One request as the routing policy sees it.
 *
 * @param id the decision id (Envoy's {@code x-request-id} when present)
 * @param request the parsed body
 * @param scope the resolved model, cache namespace and tenant pseudonym (never the tenant itself)
 * @param policyOverride the trusted {@code x-kvrouter-policy} header value, or null
 */
public record RouteRequest(String id, InferenceRequest request, RequestScope scope, String policyOverride) {

  /**
   * Why this request cannot have its prompt reproduced and must be routed by load alone (unknown model, model
   * still loading or failed, prompt embeddings, unsupported content), or null when it can.
   */
  public String pipelineFallback() {
    String f = scope.fallback();
    return f != null ? f : request.unreproducible();
  }

  /** Pseudonym of the request's tenant, or null. */
  public String tenantHash() {
    return scope.tenantHash();
  }
}
