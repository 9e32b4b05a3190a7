package dev.kvrouter.examples.report;

import dev.kvrouter.examples.workload.IdealReuse;
import dev.kvrouter.examples.workload.Workload;
import java.util.List;
import java.util.Map;

/**
 * One workload's section of the report: what it was, the reuse it offers, and one result per policy.
 *
 * @param spec the spec the workload was built from ({@code name:key=value,...})
 * @param params every effective parameter
 * @param idealTokenShare {@link IdealReuse#tokenShare()}, the figure to compare cache-served shares with
 * @param idealBlockShare {@link IdealReuse#blockShare()}
 */
public record WorkloadResult(String spec, String name, Map<String, Object> params, int requests, long contentTokens,
    double spanSeconds, double idealTokenShare, double idealBlockShare, IdealReuse ideal, List<PolicyResult> results) {

  public WorkloadResult {
    results = List.copyOf(results);
  }

  public static WorkloadResult of(String spec, Workload w, IdealReuse ideal, List<PolicyResult> results) {
    return new WorkloadResult(spec, w.name(), w.params(), w.size(), w.contentTokens(), w.spanMicros() / 1e6,
        PolicyResult.round4(ideal.tokenShare()), PolicyResult.round4(ideal.blockShare()), ideal, results);
  }

  public PolicyResult result(String policy) {
    for (PolicyResult r : results) {
      if (r.policy().equals(policy)) {
        return r;
      }
    }
    return null;
  }
}
