package dev.kvrouter.extproc.routing;

/**
 * Anchor baseline: NVIDIA Dynamo's KV router cost as Dynamo ships it (anchors §1.1, {@link Weights#DYNAMO}: prefill
 * blocks after the overlap credit plus decode blocks, no new-prefill charge, no decode-read term, no eviction or
 * hot-prefix terms), argmin with ties at random, whatever weights the model is configured with. Predicted entries
 * are credited as Dynamo's predicted-TTL side index credits them; a stale view as this router credits it (Dynamo
 * has no such notion; the A/B's comparisons run without event faults). It is here so the A/B can put our cost
 * beside Dynamo's on the same workload, same engines, same run; it is not meant for production (use
 * {@code kv_aware} with {@code Weights.DYNAMO}'s keys to route by Dynamo's formula with our tie-breaks).
 */
public final class DynamoPolicy implements RoutingPolicy {

  public static final String NAME = "dynamo";

  @Override
  public String name() {
    return NAME;
  }

  /** Dynamo's, whatever the model is configured with: the router scores and reserves with Dynamo's terms. */
  @Override
  public Weights weights(Weights configured) {
    return Weights.DYNAMO;
  }

  @Override
  public Choice choose(Scoring s) {
    Candidate c = Selection.argmin(s.candidates(), Candidate::cost, x -> 0, s.rng());
    return new Choice(c, s.hasPrompt() ? "lowest_cost" : "load_only");
  }
}
