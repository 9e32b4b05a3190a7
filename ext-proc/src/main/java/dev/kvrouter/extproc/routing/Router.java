package dev.kvrouter.extproc.routing;

import dev.kvrouter.extproc.request.OpenAiError;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import dev.kvrouter.xds.registry.WorkerSet;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * Finds the workers that may serve a request and lets the policy pick among them.
 *
 * <p>Eligibility comes first and is the same for every policy: the worker serves the model (or the LoRA
 * adapter), is not draining, and serves the decode phase. A model no worker serves at all is a 404 (what
 * the engine itself would answer); a model whose workers are all ineligible is a 503.
 */
public final class Router {

  private final WorkerRegistry registry;
  private final RoutingPolicy defaultPolicy;
  private final Map<String, RoutingPolicy> policies;
  private final LongSupplier nanoTime;

  public Router(WorkerRegistry registry, RoutingPolicy defaultPolicy, Map<String, RoutingPolicy> policies,
      LongSupplier nanoTime) {
    this.registry = registry;
    this.defaultPolicy = defaultPolicy;
    this.policies = Map.copyOf(policies);
    this.nanoTime = nanoTime;
  }

  public Decision route(RouteRequest req) {
    long start = nanoTime.getAsLong();
    String model = req.request().model();
    RoutingPolicy policy = defaultPolicy;
    String fallback = null;
    if (req.policyOverride() != null) {
      RoutingPolicy p = policies.get(req.policyOverride());
      if (p != null) {
        policy = p;
      } else {
        fallback = "unknown_policy_override";
      }
    }
    WorkerSet fleet = registry.current();
    List<Worker> serving = new ArrayList<>();
    List<Worker> eligible = new ArrayList<>();
    for (Worker w : fleet.all()) {
      if (w.serves(model)) {
        serving.add(w);
        if (!w.draining() && w.role() != Worker.Role.PREFILL) {
          eligible.add(w);
        }
      }
    }
    if (serving.isEmpty()) {
      return new Decision(req.id(), model, policy.name(), null, "model_not_served", fallback,
          OpenAiError.modelNotFound(model), nanoTime.getAsLong() - start);
    }
    if (eligible.isEmpty()) {
      return new Decision(req.id(), model, policy.name(), null, "no_eligible_worker", fallback,
          OpenAiError.noEligibleWorker(model, "all " + serving.size() + " workers are draining or prefill-only"),
          nanoTime.getAsLong() - start);
    }
    RoutingPolicy.Choice choice = policy.choose(req, eligible);
    return new Decision(req.id(), model, policy.name(), choice.worker(), choice.reason(), fallback, null,
        nanoTime.getAsLong() - start);
  }
}
