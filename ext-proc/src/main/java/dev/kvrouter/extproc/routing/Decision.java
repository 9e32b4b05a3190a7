package dev.kvrouter.extproc.routing;

import dev.kvrouter.extproc.request.OpenAiError;
import dev.kvrouter.xds.registry.Worker;

/**
 * The outcome of routing one request: either a worker, or an error the router answers itself.
 *
 * @param id decision id, echoed to the client in {@code x-kvrouter-decision}
 * @param model requested model
 * @param policy the policy that decided
 * @param chosen the worker, or null when rejected
 * @param reason why this worker (policy reason) or why rejected
 * @param fallback null when the policy ran as configured; otherwise why it ran degraded (for example
 *     {@code no_tokenizer}), so a silent drop to load balancing is always visible
 * @param rejection the error to answer with, or null when routed
 * @param decisionNanos time spent deciding
 */
public record Decision(
    String id,
    String model,
    String policy,
    Worker chosen,
    String reason,
    String fallback,
    OpenAiError rejection,
    long decisionNanos) {

  public boolean routed() {
    return chosen != null;
  }
}
