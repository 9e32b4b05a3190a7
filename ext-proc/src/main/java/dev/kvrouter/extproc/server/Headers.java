package dev.kvrouter.extproc.server;

/** Header names of the router's contract with Envoy and clients (see envoy-config/). */
public final class Headers {

  /** Cluster-header routing: the worker's Envoy cluster. */
  public static final String CLUSTER = "x-kvrouter-cluster";
  /** ORIGINAL_DST / Gateway API Inference Extension routing: the worker's ip:port. */
  public static final String DESTINATION_ENDPOINT = "x-gateway-destination-endpoint";
  /** The decision id, on the upstream request and on the client's response. */
  public static final String DECISION = "x-kvrouter-decision";
  /** Trusted per-request policy override (A/B runs); Envoy strips it from untrusted clients. */
  public static final String POLICY = "x-kvrouter-policy";
  /** Trusted per-request cost-model weights ({@code key=value,...}); Envoy strips it from untrusted clients. */
  public static final String WEIGHTS = "x-kvrouter-weights";
  /** The chosen data-parallel rank, for workers with several (vLLM and SGLang honour it). */
  public static final String DP_RANK = "x-data-parallel-rank";
  public static final String REQUEST_ID = "x-request-id";

  private Headers() {}
}
