package dev.kvrouter.extproc.routing;

import dev.kvrouter.extproc.load.Reservation;
import dev.kvrouter.extproc.request.OpenAiError;
import dev.kvrouter.xds.registry.Worker;
import java.util.List;

/**
 * The outcome of routing one request: either a worker, or an error the router answers itself.
 *
 * @param seq process-unique sequence number (keys per-request state in listeners)
 * @param id decision id, echoed to the client in {@code x-kvrouter-decision}
 * @param model requested model; null when no worker serves it (then it is the client's own text, which records
 *     never carry)
 * @param policy the policy that decided
 * @param chosen the worker, or null when rejected
 * @param dpRank the chosen data-parallel rank (0 unless the worker has several), -1 when rejected
 * @param reason why this worker (policy reason) or why rejected
 * @param fallback null when the policy ran as configured; otherwise why it ran degraded, comma-separated tokens
 *     ({@code no_tokenization}, {@code stale_events}, {@code all_unhealthy}, {@code all_busy}, {@code not_in_envoy},
 *     {@code unknown_policy_override}, {@code invalid_weights_override}), so a silent drop to load balancing is
 *     always visible
 * @param rejection the error to answer with, or null when routed
 * @param detail the inputs and per-candidate terms, for the decision record
 * @param reservation the load ledger's claim for this request ({@link Reservation#NONE} when rejected)
 * @param decisionNanos time spent deciding
 */
public record Decision(
    long seq,
    String id,
    String model,
    String policy,
    Worker chosen,
    int dpRank,
    String reason,
    String fallback,
    OpenAiError rejection,
    Detail detail,
    Reservation reservation,
    long decisionNanos) {

  public boolean routed() {
    return chosen != null;
  }

  /** The same decision under another id: see {@code InFlight.register} (two requests sent with one request id). */
  public Decision withId(String newId) {
    return new Decision(seq, newId, model, policy, chosen, dpRank, reason, fallback, rejection, detail, reservation,
        decisionNanos);
  }

  /**
   * What went into the decision. Immutable apart from the candidate list, which the decision record's writer
   * drops once the record is written ({@link #releaseCandidates}): a decision lives as long as its response, and
   * N candidates per in-flight request would otherwise be the router's largest memory cost.
   */
  public static final class Detail {
    private final String tenantHash;
    private final long promptTokens;
    private final boolean promptExact;
    private final String promptUnavailable;
    private final RequestShape shape;
    private final int expectedOutputTokens;
    private volatile List<Candidate> candidates;
    private final Candidate chosen;
    private final long predictedCachedTokens;
    private final long lookupNanos;
    private final long scoreNanos;
    private final RequestTimings upstream;
    private final boolean stream;
    private final EvictionPressure.Reading pressure;

    /**
     * @param tenantHash the tenant's keyed pseudonym (TenantIsolation.tenantHash), or null without a tenant (the id
     *     itself is never logged)
     * @param promptTokens prompt tokens (estimated when {@code promptExact} is false)
     * @param promptExact whether the request path tokenized the prompt
     * @param promptUnavailable why it did not, or null
     * @param shape the request in blocks
     * @param expectedOutputTokens output tokens reserved for
     * @param candidates every worker rank serving the model, eligible or not, in fleet order
     * @param chosen the chosen candidate, or null
     * @param predictedCachedTokens cached tokens the router expects the worker to report (the truth check)
     * @param lookupNanos time in the overlap lookup
     * @param scoreNanos time in eligibility, scoring and selection
     * @param upstream the request path's own timings
     * @param stream whether the client asked for a streamed response (its first byte is the first token)
     * @param pressure the model's eviction share and the request's prefix heat as the cost read them
     *     ({@link EvictionPressure}), zeros when not scored
     */
    public Detail(String tenantHash, long promptTokens, boolean promptExact, String promptUnavailable,
        RequestShape shape, int expectedOutputTokens, List<Candidate> candidates, Candidate chosen,
        long predictedCachedTokens, long lookupNanos, long scoreNanos, RequestTimings upstream, boolean stream,
        EvictionPressure.Reading pressure) {
      this.pressure = pressure;
      this.tenantHash = tenantHash;
      this.promptTokens = promptTokens;
      this.promptExact = promptExact;
      this.promptUnavailable = promptUnavailable;
      this.shape = shape;
      this.expectedOutputTokens = expectedOutputTokens;
      this.candidates = java.util.Collections.unmodifiableList(candidates);
      this.chosen = chosen;
      this.predictedCachedTokens = predictedCachedTokens;
      this.lookupNanos = lookupNanos;
      this.scoreNanos = scoreNanos;
      this.upstream = upstream;
      this.stream = stream;
    }

    public String tenantHash() {
      return tenantHash;
    }

    public long promptTokens() {
      return promptTokens;
    }

    public boolean promptExact() {
      return promptExact;
    }

    public String promptUnavailable() {
      return promptUnavailable;
    }

    public RequestShape shape() {
      return shape;
    }

    public int expectedOutputTokens() {
      return expectedOutputTokens;
    }

    /** Every candidate, or an empty list once {@link #releaseCandidates} ran. */
    public List<Candidate> candidates() {
      return candidates;
    }

    /** The chosen candidate, or null when rejected; kept after {@link #releaseCandidates}. */
    public Candidate chosen() {
      return chosen;
    }

    public long predictedCachedTokens() {
      return predictedCachedTokens;
    }

    public long lookupNanos() {
      return lookupNanos;
    }

    public long scoreNanos() {
      return scoreNanos;
    }

    public RequestTimings upstream() {
      return upstream;
    }

    public boolean stream() {
      return stream;
    }

    /** The model's eviction share at the decision ({@link EvictionPressure}); 0 without block hashes. */
    public double evictionShare() {
      return pressure.evictionShare();
    }

    /** The recent share of requests on this request's held prefix ({@link PrefixHeat}); 0 when none is held. */
    public double prefixHeat() {
      return pressure.prefixHeat();
    }

    /** Drops the candidate list (the decision record has been written); the chosen one stays. */
    public void releaseCandidates() {
      candidates = List.of();
    }
  }
}
