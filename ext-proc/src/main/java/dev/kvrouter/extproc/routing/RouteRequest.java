package dev.kvrouter.extproc.routing;

import dev.kvrouter.extproc.request.InferenceRequest;
import java.nio.charset.StandardCharsets;
import net.openhft.hashing.LongHashFunction;

/**
 * One request as the routing policy sees it.
 *
 * @param id the decision id (Envoy's {@code x-request-id} when present)
 * @param request the parsed body fields
 * @param tenantHash pseudonym of the request's tenant (never the tenant id itself), or null without a tenant;
 *     the request path's keyed pseudonym replaces {@link #tenantPseudonym} when it lands
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
    String tenantHash,
    String policyOverride,
    String weightsOverride,
    PromptInfo prompt,
    String promptUnavailable,
    int approxPromptTokens,
    RequestTimings timings) {

  public RouteRequest {
    timings = timings == null ? RequestTimings.NONE : timings;
  }

  private static final LongHashFunction TENANT_HASH = LongHashFunction.xx3();

  /**
   * A request the request path did not tokenize (the skeleton's shape), from the raw trusted tenant header
   * value, which is pseudonymised here and not kept.
   */
  public RouteRequest(String id, InferenceRequest request, String tenant, String policyOverride) {
    this(id, request, tenantPseudonym(tenant), policyOverride, null, null, null, 0, RequestTimings.NONE);
  }

  /**
   * 16 hex digits of XXH3-64 of the tenant id, or null for none: a stand-in pseudonym for decision records until
   * the request path supplies its keyed one (an unkeyed hash of a guessable id can be reversed by trying ids).
   */
  public static String tenantPseudonym(String tenant) {
    if (tenant == null || tenant.isEmpty()) {
      return null;
    }
    String hex = Long.toHexString(TENANT_HASH.hashBytes(tenant.getBytes(StandardCharsets.UTF_8)));
    return hex.length() == 16 ? hex : "0".repeat(16 - hex.length()) + hex;
  }

  public RouteRequest withPrompt(PromptInfo p) {
    return new RouteRequest(id, request, tenantHash, policyOverride, weightsOverride, p, promptUnavailable,
        approxPromptTokens, timings);
  }

  public RouteRequest withPolicy(String p) {
    return new RouteRequest(id, request, tenantHash, p, weightsOverride, prompt, promptUnavailable, approxPromptTokens,
        timings);
  }

  public RouteRequest withWeightsOverride(String w) {
    return new RouteRequest(id, request, tenantHash, policyOverride, w, prompt, promptUnavailable, approxPromptTokens,
        timings);
  }
}
