package dev.kvrouter.extproc.routing;

import dev.kvrouter.extproc.request.InferenceRequest;

/**
 * One request as the routing policy sees it.
 *
 * @param id the decision id (Envoy's {@code x-request-id} when present)
 * @param request the parsed body fields
 * @param tenant the trusted tenant header value, or null
 * @param policyOverride the trusted {@code x-kvrouter-policy} header value, or null
 * @param weightsOverride the trusted {@code x-kvrouter-weights} header value ({@code key=value,...}), or null
 * @param prompt tokens and block hashes, or null when the request path could not produce them
 * @param promptUnavailable when {@code prompt} is null, why (a short token such as {@code unknown_model},
 *     {@code template_error}, {@code tokenizer_failure}); null means the request path did not try
 * @param approxPromptTokens an estimate of the prompt length used for load accounting when {@code prompt} is
 *     null (for example body bytes / 4); 0 when unknown
 * @param timings time the request path spent before routing
 */
public record RouteRequest(
    String id,
    InferenceRequest request,
    String tenant,
    String policyOverride,
    String weightsOverride,
    PromptInfo prompt,
    String promptUnavailable,
    int approxPromptTokens,
    RequestTimings timings) {

  public RouteRequest {
    timings = timings == null ? RequestTimings.NONE : timings;
  }

  /** A request the request path did not tokenize (the skeleton's shape). */
  public RouteRequest(String id, InferenceRequest request, String tenant, String policyOverride) {
    this(id, request, tenant, policyOverride, null, null, null, 0, RequestTimings.NONE);
  }

  public RouteRequest withPrompt(PromptInfo p) {
    return new RouteRequest(id, request, tenant, policyOverride, weightsOverride, p, promptUnavailable,
        approxPromptTokens, timings);
  }

  public RouteRequest withPolicy(String p) {
    return new RouteRequest(id, request, tenant, p, weightsOverride, prompt, promptUnavailable, approxPromptTokens,
        timings);
  }

  public RouteRequest withWeightsOverride(String w) {
    return new RouteRequest(id, request, tenant, policyOverride, w, prompt, promptUnavailable, approxPromptTokens,
        timings);
  }
}
