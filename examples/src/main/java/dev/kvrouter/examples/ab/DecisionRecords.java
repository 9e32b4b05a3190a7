package dev.kvrouter.examples.ab;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.report.LatencyStats;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.report.RoutingOverhead;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.HdrHistogram.Histogram;

/**
 * Reads the router's decision records ({@code {"event":"decision",...}} and {@code {"event":"outcome",...}} JSON
 * lines, docs/routing.md) for the requests of one run: the routing overhead the report shows, and the truth check
 * (predicted versus actual cached tokens) per outcome.
 */
public final class DecisionRecords {

  private static final ObjectMapper JSON = new ObjectMapper();

  private final Map<String, JsonNode> decisions = new HashMap<>();
  private final Map<String, JsonNode> outcomes = new HashMap<>();

  private DecisionRecords() {}

  /** Parses lines; anything that is not a decision or outcome record is skipped. */
  public static DecisionRecords parse(List<String> lines) {
    DecisionRecords r = new DecisionRecords();
    for (String line : lines) {
      try {
        JsonNode n = JSON.readTree(line);
        String id = n.path("id").asText(null);
        if (id == null) {
          continue;
        }
        switch (n.path("event").asText("")) {
          case "decision" -> r.decisions.put(id, n);
          case "outcome" -> r.outcomes.put(id, n);
          default -> { }
        }
      } catch (Exception e) {
        // a torn or foreign line: not a record
      }
    }
    return r;
  }

  /**
   * Decision time of the run's requests (request path up to the routing decision: parse, template, tokenize,
   * hash, then lookup and scoring), from the records whose id a response carried.
   */
  public RoutingOverhead overhead(List<RequestRecord> requests) {
    Histogram h = LatencyStats.newMicrosHistogram();
    long fallbacks = 0;
    for (RequestRecord q : requests) {
      JsonNode d = q.decisionId() == null ? null : decisions.get(q.decisionId());
      if (d == null) {
        continue;
      }
      JsonNode t = d.path("timings_us");
      double total = t.path("parse").asDouble() + t.path("template").asDouble() + t.path("tokenize").asDouble()
          + t.path("hash").asDouble() + t.path("decision").asDouble();
      h.recordValue(Math.max(0, Math.round(total)));
      if (!d.path("fallback").isNull() && !d.path("fallback").isMissingNode()) {
        fallbacks++;
      }
    }
    long n = h.getTotalCount();
    return new RoutingOverhead(n, n == 0 ? 0 : h.getMean(), h.getValueAtPercentile(50), h.getValueAtPercentile(99),
        h.getMaxValue(), fallbacks);
  }

  /** Truth-check outcomes ({@code within_block}, {@code over}, {@code under}, {@code unknown}) of the requests. */
  public Map<String, Long> truth(List<RequestRecord> requests) {
    Map<String, Long> m = new TreeMap<>();
    for (RequestRecord q : requests) {
      JsonNode o = q.decisionId() == null ? null : outcomes.get(q.decisionId());
      if (o != null) {
        m.merge(o.path("truth").asText("unknown"), 1L, Long::sum);
      }
    }
    return m;
  }

  /**
   * The router's view of the requests' TTFT: mean and median of the outcome records' {@code ttft_ms} (from the
   * routing decision to the first body byte the router saw), in ms, or null when none carried one. Beside the
   * client's TTFT and the engines' it splits what stands in front of the engines: client to decision, and
   * decision to engine and back.
   */
  public RouterTtft routerTtft(List<RequestRecord> requests) {
    Histogram h = LatencyStats.newMicrosHistogram();
    for (RequestRecord q : requests) {
      JsonNode o = q.decisionId() == null ? null : outcomes.get(q.decisionId());
      if (o != null && o.path("ttft_ms").isNumber()) {
        h.recordValue(Math.max(0, Math.round(o.path("ttft_ms").asDouble() * 1000)));
      }
    }
    if (h.getTotalCount() == 0) {
      return null;
    }
    return new RouterTtft(h.getMean() / 1000, h.getValueAtPercentile(50) / 1000.0);
  }

  /** The router's view of TTFT over a run's requests, in ms. */
  public record RouterTtft(double meanMs, double p50Ms) {}

  public int decisions() {
    return decisions.size();
  }
}
