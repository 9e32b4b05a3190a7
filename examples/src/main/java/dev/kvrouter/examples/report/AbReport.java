package dev.kvrouter.examples.report;

import java.util.List;
import java.util.Map;

/**
 * The A/B report: for each workload, the same requests under each policy.
 *
 * @param schema format version of the JSON file
 * @param generatedAt ISO-8601 instant
 * @param meta how it was produced: command line, target, seed, block size, fleet, versions
 * @param ours the policy under test (first in tables)
 * @param baseline the policy ratios are taken against (round_robin)
 */
public record AbReport(String schema, String generatedAt, Map<String, Object> meta, String ours, String baseline,
    List<WorkloadResult> workloads) {

  public static final String SCHEMA = "kvrouter.ab-report/1";

  public AbReport {
    workloads = List.copyOf(workloads);
    meta = java.util.Collections.unmodifiableMap(new java.util.LinkedHashMap<>(meta));
  }
}
