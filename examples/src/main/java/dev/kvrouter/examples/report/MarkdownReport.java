package dev.kvrouter.examples.report;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The report as markdown: a summary across workloads, then per workload a table with one row per policy (ours
 * first, then the baseline, then the rest) and its ratios against the baseline. Ratios are baseline / policy for
 * latencies, so "12.0x" reads "12 times lower than the baseline".
 */
public final class MarkdownReport {

  private MarkdownReport() {}

  public static String render(AbReport report) {
    StringBuilder b = new StringBuilder();
    b.append("# A/B report\n\n");
    b.append("Generated ").append(report.generatedAt()).append(". Ours: `").append(report.ours())
        .append("`, baseline: `").append(report.baseline()).append("`.\n\n");
    Object cmd = report.meta().get("command");
    if (cmd != null) {
      b.append("```\n").append(cmd).append("\n```\n\n");
    }
    summary(b, report);
    for (WorkloadResult w : report.workloads()) {
      section(b, report, w);
    }
    return b.toString();
  }

  private static void summary(StringBuilder b, AbReport report) {
    List<String> policies = policies(report);
    if (policies.isEmpty()) {
      return;
    }
    b.append("## Summary: TTFT p50 (ms) and prompt tokens served from cache\n\n| workload | ideal reuse |");
    for (String p : policies) {
      b.append(' ').append(p).append(" |");
    }
    b.append("\n|---|---:|");
    b.append("---:|".repeat(policies.size())).append('\n');
    for (WorkloadResult w : report.workloads()) {
      b.append("| `").append(w.spec()).append("` | ").append(pct(w.idealTokenShare())).append(" |");
      for (String p : policies) {
        PolicyResult r = w.result(p);
        b.append(' ').append(r == null ? "-" : ms(r.ttftMs().p50()) + " / " + pct(r.cache().servedShare()))
            .append(" |");
      }
      b.append('\n');
    }
    b.append('\n');
  }

  private static void section(StringBuilder b, AbReport report, WorkloadResult w) {
    b.append("## `").append(w.spec()).append("`\n\n");
    b.append(String.format(Locale.ROOT, "%d requests over %.1f s, %,d prompt tokens (before any chat template); ideal reuse %s of prompt "
            + "tokens (%s of full blocks) at block size %d.%n%n", w.requests(), w.spanSeconds(), w.contentTokens(),
        pct(w.idealTokenShare()), pct(w.idealBlockShare()), w.ideal().blockSize()));
    b.append("| policy | TTFT p50 | TTFT p99 | E2E p50 | E2E p99 | req/s | from cache | of ideal | imbalance req / "
        + "prefill / work / load | errors | TTFT p50 vs base | TTFT p99 vs base | E2E p50 vs base |\n");
    b.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    PolicyResult base = w.result(report.baseline());
    for (PolicyResult r : ordered(report, w)) {
      b.append("| ").append(r.policy()).append(r.policy().equals(report.ours()) ? " (ours)" : "").append(" | ");
      b.append(ms(r.ttftMs().p50())).append(" | ").append(ms(r.ttftMs().p99())).append(" | ")
          .append(ms(r.e2eMs().p50())).append(" | ").append(ms(r.e2eMs().p99())).append(" | ")
          .append(num(r.throughput().requestsPerSecond())).append(" | ")
          .append(pct(r.cache().servedShare())).append(" | ")
          .append(r.cache().servedVsIdeal() == null ? "-" : pct(r.cache().servedVsIdeal())).append(" | ")
          .append(num(r.balance().requestImbalance())).append(" / ")
          .append(r.balance().prefillImbalance() == null ? "-" : num(r.balance().prefillImbalance())).append(" / ")
          .append(r.balance().workImbalance() == null ? "-" : num(r.balance().workImbalance())).append(" / ")
          .append(r.balance().meanLoadImbalance() == null ? "-" : num(r.balance().meanLoadImbalance()))
          .append(" | ").append(errors(r)).append(" | ");
      b.append(ratio(base == null ? 0 : base.ttftMs().p50(), r.ttftMs().p50())).append(" | ")
          .append(ratio(base == null ? 0 : base.ttftMs().p99(), r.ttftMs().p99())).append(" | ")
          .append(ratio(base == null ? 0 : base.e2eMs().p50(), r.e2eMs().p50())).append(" |\n");
    }
    b.append("\nLatencies in ms. \"from cache\": prompt tokens served from the prefix cache (source: ")
        .append(w.results().isEmpty() ? "-" : w.results().get(0).cache().source())
        .append("); \"of ideal\": that share over the ideal reuse. Imbalance: max over mean of requests, of "
            + "computed prefill tokens, of computed tokens (prefill computed + generated: the work), and of "
            + "queued + running requests over time. \"vs base\": "
            + report.baseline() + " / policy.\n\n");
    routerCost(b, report, w);
    engineTtft(b, report, w);
    sessions(b, report, w);
  }

  /** The engines' own mean TTFT beside the client's, for runs whose workers export the histogram. */
  private static void engineTtft(StringBuilder b, AbReport report, WorkloadResult w) {
    List<PolicyResult> measured = ordered(report, w).stream().filter(r -> r.engineTtft() != null).toList();
    if (measured.isEmpty()) {
      return;
    }
    b.append("| policy | TTFT mean at the client | at the workers' HTTP servers | at the engines | in front of them "
        + "| of which the simulated engines' lateness |\n|---|---:|---:|---:|---:|---:|\n");
    for (PolicyResult r : measured) {
      PolicyResult.EngineTtft e = r.engineTtft();
      b.append("| ").append(r.policy()).append(" | ").append(ms(r.ttftMs().mean())).append(" | ")
          .append(e.simServerMs() == null ? "-" : ms(e.simServerMs())).append(" | ")
          .append(ms(e.meanMs())).append(" | ").append(ms(e.frontMs())).append(" | ")
          .append(e.simLateMs() == null ? "-" : ms(e.simLateMs())).append(" |\n");
    }
    b.append("\nMeans in ms; the engines' from their `vllm:time_to_first_token_seconds` histograms (arrival at the "
        + "engine to the first token, as the engine times it), the rest is the proxy, the router, the HTTP hops and "
        + "the client, and for simulated engines on a loaded host their thread's lateness after the modelled step "
        + "end.\n\n");
  }

  /** The router's own cost per policy, for runs that measured it (a router process or the in-process one). */
  private static void routerCost(StringBuilder b, AbReport report, WorkloadResult w) {
    List<PolicyResult> measured = ordered(report, w).stream()
        .filter(r -> r.router() != null && r.router().cpuSeconds() != null).toList();
    if (measured.isEmpty()) {
      return;
    }
    b.append("| policy | router CPU s | µs per request | of which JIT s | µs per request without JIT | RSS after MB "
        + "| decision p50 / p99 µs |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (PolicyResult r : measured) {
      PolicyResult.RouterCost c = r.router();
      b.append("| ").append(r.policy()).append(" | ").append(num(c.cpuSeconds())).append(" | ")
          .append(c.cpuMicrosPerRequest() == null ? "-" : ms(c.cpuMicrosPerRequest())).append(" | ")
          .append(c.jitCpuSeconds() == null ? "-" : num(c.jitCpuSeconds())).append(" | ")
          .append(c.cpuMicrosPerRequestWithoutJit() == null ? "-" : ms(c.cpuMicrosPerRequestWithoutJit()))
          .append(" | ").append(c.rssAfterBytes() == null ? "-" : ms(c.rssAfterBytes() / 1e6)).append(" | ")
          .append(c.decisions() == null ? "-" : ms(c.decisions().p50Micros()) + " / " + ms(c.decisions().p99Micros()))
          .append(" |\n");
    }
    b.append("\nThe router's own CPU over each run. A fresh router compiles its hot paths during the first policy's "
        + "run and runs them interpreted until then: compare policies on the cost without JIT, and know that the "
        + "first run still carries some of the warm-up (send the whole workload as warm-up to remove it).\n\n");
  }

  /** Closed-loop conversations: one row per policy whose run had them. */
  private static void sessions(StringBuilder b, AbReport report, WorkloadResult w) {
    List<PolicyResult> closed = ordered(report, w).stream().filter(r -> r.sessions() != null).toList();
    if (closed.isEmpty()) {
      return;
    }
    b.append("| policy | later turns held back | total hold s | mean hold s | max hold s | answers resent short "
        + "(none received) | streamed answers as scripted |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (PolicyResult r : closed) {
      Sessions s = r.sessions();
      b.append(String.format(Locale.ROOT, "| %s | %d of %d | %.3f | %.3f | %.3f | %d (%d) | %s |%n", r.policy(),
          s.heldBack(), s.dependentTurns(), s.heldBackSeconds(), s.meanHeldBackSeconds(), s.maxHeldBackSeconds(),
          s.answersResentShort(), s.answersResentEmpty(), s.streamedAnswers() == null ? "- (fresh answers)"
              : s.streamedAnswers().asScripted() + " of " + s.streamedAnswers().total()));
    }
    b.append("\nClosed loop: a later turn is sent at its planned time or once the previous turn of its session "
        + "ended, whichever is later; a held turn waited for it.\n\n");
  }

  private static List<PolicyResult> ordered(AbReport report, WorkloadResult w) {
    List<PolicyResult> out = new ArrayList<>();
    PolicyResult ours = w.result(report.ours());
    PolicyResult base = w.result(report.baseline());
    if (ours != null) {
      out.add(ours);
    }
    if (base != null && base != ours) {
      out.add(base);
    }
    for (PolicyResult r : w.results()) {
      if (r != ours && r != base) {
        out.add(r);
      }
    }
    return out;
  }

  private static List<String> policies(AbReport report) {
    List<String> out = new ArrayList<>();
    for (WorkloadResult w : report.workloads()) {
      for (PolicyResult r : ordered(report, w)) {
        if (!out.contains(r.policy())) {
          out.add(r.policy());
        }
      }
    }
    return out;
  }

  private static String errors(PolicyResult r) {
    if (r.errors().isEmpty()) {
      return "0";
    }
    StringBuilder s = new StringBuilder();
    for (Map.Entry<String, Long> e : r.errors().entrySet()) {
      s.append(s.length() == 0 ? "" : ", ").append(e.getKey()).append(' ').append(e.getValue());
    }
    return s.toString();
  }

  static String ms(double v) {
    if (v >= 100) {
      return String.format(Locale.ROOT, "%,.0f", v);
    }
    return String.format(Locale.ROOT, v >= 10 ? "%.1f" : "%.2f", v);
  }

  static String pct(double share) {
    return String.format(Locale.ROOT, "%.1f%%", share * 100);
  }

  private static String num(double v) {
    return String.format(Locale.ROOT, "%.2f", v);
  }

  /** {@code base / value} as "12.3x"; "-" when either side is missing. */
  static String ratio(double base, double value) {
    if (base <= 0 || value <= 0) {
      return "-";
    }
    double r = base / value;
    return String.format(Locale.ROOT, r >= 10 ? "%.1fx" : "%.2fx", r);
  }
}
