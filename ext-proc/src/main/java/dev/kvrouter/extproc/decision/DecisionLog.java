package dev.kvrouter.extproc.decision;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import dev.kvrouter.extproc.routing.Candidate;
import dev.kvrouter.extproc.routing.Decision;
import dev.kvrouter.extproc.routing.RequestTimings;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.time.Clock;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Renders decision records as one JSON object per line: a {@code decision} line per request and an
 * {@code outcome} line when its response ends. Structured fields only; no prompt text, no token ids, no tenant
 * id (its hash). Written to the logger {@code kvrouter.decisions} at INFO (the command gives that logger a
 * message-only appender, so each line is exactly the JSON object), or to any sink in tests.
 *
 * <p>Field reference: docs/routing.md, "Decision records". Thread-safe (stateless apart from its sink).
 */
public final class DecisionLog {

  public static final String LOGGER = "kvrouter.decisions";
  private static final Logger log = LoggerFactory.getLogger(LOGGER);
  private static final JsonFactory JSON = new JsonFactory();

  private final Consumer<String> sink;
  private final Clock clock;
  private final int maxCandidates;
  private final boolean enabled;

  /**
   * @param sink where lines go
   * @param clock wall clock for {@code ts}
   * @param maxCandidates candidates listed per decision at most (the chosen one and the cheapest first); the
   *     rest are counted in {@code candidates_omitted}
   */
  public DecisionLog(Consumer<String> sink, Clock clock, int maxCandidates, boolean enabled) {
    this.sink = sink;
    this.clock = clock;
    this.maxCandidates = Math.max(1, maxCandidates);
    this.enabled = enabled;
  }

  /** Lines to the {@code kvrouter.decisions} logger. */
  public static DecisionLog toLogger(int maxCandidates, boolean enabled) {
    return new DecisionLog(log::info, Clock.systemUTC(), maxCandidates, enabled && log.isInfoEnabled());
  }

  public boolean enabled() {
    return enabled;
  }

  public void decision(Decision d) {
    decision(d, 0);
  }

  /**
   * @param ageNanos how long ago the decision was made: its line is written when the response starts, and
   *     {@code ts} must say when the request was routed, so lines order and join with other logs by decision time
   */
  public void decision(Decision d, long ageNanos) {
    if (enabled) {
      sink.accept(decisionJson(d, ageNanos));
    }
  }

  public void outcome(Decision d, int status, boolean aborted, TruthCheck truth, long reportedPromptTokens,
      double ttftMs, double durationMs) {
    if (enabled) {
      sink.accept(outcomeJson(d, status, aborted, truth, reportedPromptTokens, ttftMs, durationMs));
    }
  }

  String decisionJson(Decision d) {
    return decisionJson(d, 0);
  }

  String decisionJson(Decision d, long ageNanos) {
    StringWriter out = new StringWriter(512);
    try (JsonGenerator g = JSON.createGenerator(out)) {
      Decision.Detail x = d.detail();
      g.writeStartObject();
      g.writeStringField("event", "decision");
      g.writeStringField("id", d.id());
      g.writeNumberField("seq", d.seq());
      g.writeStringField("ts", clock.instant().minusNanos(Math.max(0, ageNanos)).toString());
      nullable(g, "model", d.model());
      nullable(g, "tenant_hash", x.tenantHash());
      g.writeStringField("policy", d.policy());
      nullable(g, "chosen", d.routed() ? d.chosen().name() : null);
      if (d.routed()) {
        g.writeNumberField("dp_rank", d.dpRank());
      }
      g.writeStringField("reason", d.reason());
      nullable(g, "fallback", d.fallback());
      if (!d.routed()) {
        g.writeNumberField("status", d.rejection().status());
      }
      g.writeNumberField("prompt_tokens", x.promptTokens());
      g.writeBooleanField("prompt_exact", x.promptExact());
      nullable(g, "prompt_unavailable", x.promptUnavailable());
      g.writeNumberField("prompt_blocks", x.shape().promptBlocks());
      g.writeNumberField("hashed_blocks", x.shape().fullBlocks());
      g.writeNumberField("block_size", x.shape().blockSize());
      g.writeNumberField("expected_output_tokens", x.expectedOutputTokens());
      if (d.routed()) {
        g.writeNumberField("predicted_cached_tokens", x.predictedCachedTokens());
        g.writeNumberField("eviction_share", Math.round(x.evictionShare() * 1e4) / 1e4);
        g.writeNumberField("prefix_heat", Math.round(x.prefixHeat() * 1e4) / 1e4);
      }
      List<Candidate> listed = listed(x.candidates(), x.chosen());
      g.writeArrayFieldStart("candidates");
      for (Candidate c : listed) {
        candidate(g, c);
      }
      g.writeEndArray();
      if (listed.size() < x.candidates().size()) {
        g.writeNumberField("candidates_omitted", x.candidates().size() - listed.size());
      }
      g.writeObjectFieldStart("timings_us");
      RequestTimings t = x.upstream();
      micros(g, "parse", t.parseNanos());
      micros(g, "template", t.templateNanos());
      micros(g, "tokenize", t.tokenizeNanos());
      micros(g, "hash", t.hashNanos());
      micros(g, "lookup", x.lookupNanos());
      micros(g, "score", x.scoreNanos());
      micros(g, "decision", d.decisionNanos());
      g.writeEndObject();
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  String outcomeJson(Decision d, int status, boolean aborted, TruthCheck truth, long reportedPromptTokens,
      double ttftMs, double durationMs) {
    StringWriter out = new StringWriter(256);
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      g.writeStringField("event", "outcome");
      g.writeStringField("id", d.id());
      g.writeNumberField("seq", d.seq());
      g.writeStringField("ts", clock.instant().toString());
      g.writeStringField("model", d.model());
      g.writeStringField("policy", d.policy());
      g.writeStringField("worker", d.chosen().name());
      g.writeNumberField("dp_rank", d.dpRank());
      if (status > 0) {
        g.writeNumberField("status", status);
      } else {
        g.writeNullField("status");
      }
      g.writeBooleanField("aborted", aborted);
      g.writeNumberField("predicted_cached_tokens", truth.predicted());
      if (truth.actual() >= 0) {
        g.writeNumberField("actual_cached_tokens", truth.actual());
      } else {
        g.writeNullField("actual_cached_tokens");
      }
      if (reportedPromptTokens >= 0) {
        g.writeNumberField("reported_prompt_tokens", reportedPromptTokens);
      }
      g.writeStringField("truth", truth.outcome());
      millis(g, "ttft_ms", ttftMs);
      millis(g, "duration_ms", durationMs);
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  private List<Candidate> listed(List<Candidate> all, Candidate chosen) {
    if (all.size() <= maxCandidates) {
      return all;
    }
    List<Candidate> sorted = new ArrayList<>(all);
    sorted.sort(Comparator.comparing((Candidate c) -> c != chosen)
        .thenComparing(c -> !c.scored())
        .thenComparingDouble(Candidate::cost));
    return sorted.subList(0, maxCandidates);
  }

  private static void candidate(JsonGenerator g, Candidate c) throws IOException {
    g.writeStartObject();
    g.writeStringField("worker", c.worker().name());
    g.writeNumberField("dp_rank", c.id().dpRank());
    g.writeObjectFieldStart("overlap");
    g.writeNumberField("gpu", c.overlap().gpu());
    g.writeNumberField("cpu", c.overlap().cpu());
    g.writeNumberField("disk", c.overlap().disk());
    g.writeNumberField("predicted", c.overlap().predicted());
    g.writeEndObject();
    g.writeBooleanField("stale", c.overlap().stale());
    if (c.overlap().stale()) {
      g.writeNumberField("view_trust", round(c.viewTrust()));
    }
    g.writeNumberField("active_prefill_tokens", c.load().prefillTokens());
    g.writeNumberField("active_decode_blocks", c.load().decodeBlocks());
    g.writeNumberField("active_context_blocks", c.load().contextBlocks());
    g.writeNumberField("active_requests", c.load().requests());
    if (!Double.isNaN(c.load().kvUsage())) {
      g.writeNumberField("kv_usage", round(c.load().kvUsage()));
    }
    g.writeBooleanField("scraped", c.load().scraped());
    if (c.scored()) {
      g.writeNumberField("credit_blocks", round(c.creditBlocks()));
      g.writeNumberField("prefill_blocks", round(c.prefillBlocks()));
      g.writeNumberField("decode_blocks", round(c.decodeBlocks()));
      g.writeNumberField("read_blocks", round(c.readBlocks()));
      if (c.readSteps() != 1) {
        g.writeNumberField("read_steps", round(c.readSteps()));
      }
      g.writeNumberField("cost", round(c.cost()));
    }
    g.writeBooleanField("eligible", c.eligible());
    nullable(g, "why_not", c.whyNot());
    g.writeEndObject();
  }

  private static double round(double v) {
    return Math.round(v * 1000) / 1000.0;
  }

  private static void micros(JsonGenerator g, String name, long nanos) throws IOException {
    g.writeNumberField(name, Math.round(nanos / 100.0) / 10.0);
  }

  private static void millis(JsonGenerator g, String name, double ms) throws IOException {
    if (ms >= 0) {
      g.writeNumberField(name, Math.round(ms * 1000) / 1000.0);
    } else {
      g.writeNullField(name);
    }
  }

  private static void nullable(JsonGenerator g, String name, String v) throws IOException {
    if (v == null) {
      g.writeNullField(name);
    } else {
      g.writeStringField(name, v);
    }
  }
}
