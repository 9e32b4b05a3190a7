package dev.kvrouter.extproc.routing;

import dev.kvrouter.extproc.request.InferenceRequest;

/**
 * One request as the routing policy sees it.
 *
 * @param id the decision id (Envoy's {@code x-request-id} when present)
 * @param request the parsed body fields
 * @param tenant the trusted tenant header value, or null
 * @param policyOverride the trusted {@code x-kvrouter-policy} header value, or null
 */
public record RouteRequest(String id, InferenceRequest request, String tenant, String policyOverride) {}
