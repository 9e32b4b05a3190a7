package dev.kvrouter.examples.ab;

import dev.kvrouter.examples.report.PolicyResult;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.math.MathContext;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * The objective meaning of "a load where round-robin is near saturation": round-robin's capacity on a workload,
 * measured in virtual time on the A/B's own fleet, and the load that offers a stated share of it.
 *
 * <ul>
 *   <li><b>Capacity</b> μ: round-robin's throughput when its fleet is never short of work, in requests per
 *       second: completed requests over the time from the first arrival to the last completion, in a run offered
 *       far more than that. The search doubles the workload's load knob ({@link WorkloadCatalog#loadKnob}) from
 *       the spec's value until two probes in a row complete requests at less than {@value #OVERLOAD_SHARE} of
 *       the rate they arrive (requests over the arrival span), and takes the larger of the two throughputs. The
 *       last requests drain with a thinning batch, so this slightly underestimates μ (a lighter operating point,
 *       not a heavier one). Completions are not counted over a window inside the run: under overload a fleet of
 *       8 x 256 running sequences finishes its last few thousand requests together, so windowed rates mislead.
 *   <li><b>Offered rate</b> of a workload: requests per second across the middle half of its arrivals (from the
 *       arrival at the 25th percentile to that at the 75th), so the ramp-up and ramp-down of a session workload
 *       do not dilute it.
 *   <li><b>Utilisation</b> ρ = offered / μ. The A/B's operating point for a target ρ is the knob value whose
 *       workload offers ρ × μ, found by rescaling the knob and rebuilding the workload (the offered rate is linear
 *       in it for open arrivals; session workloads, whose think time does not scale, take a few rounds). A
 *       multi-turn workload scales its session count with its session rate ({@link WorkloadCatalog#withLoad}),
 *       so its sessions start over a fixed window and the load has a steady middle.
 * </ul>
 *
 * <p>The capacity is round-robin's own: it serves some prompts from cache by chance, and that is part of what it
 * can deliver. The same seed and fleet as the A/B, so the A/B at ρ = 0.9 is round-robin at 90% of what it can
 * sustain on that workload. A curve of round-robin's TTFT at a few utilisations is kept beside the result so the
 * knee can be seen. Single-threaded; each probe is one {@link VirtualRun}.
 */
public final class SaturationSearch {

  /** A probe whose delivered rate is below this share of its offered rate is overloaded. */
  public static final double OVERLOAD_SHARE = 0.8;
  /** The policy whose saturation the issue asks about. */
  public static final String POLICY = "round_robin";
  /** Bound on knob doublings. */
  static final int MAX_DOUBLINGS = 12;
  /** Bound on a probe's size (a multi-turn workload grows with its rate): beyond it the search gives up. */
  static final int MAX_PROBE_REQUESTS = 1_000_000;
  /** Bound on rescaling rounds when solving for a target offered rate. */
  static final int MAX_RESCALES = 12;
  /** Relative tolerance of the solved offered rate. */
  static final double RATE_TOLERANCE = 0.005;

  private SaturationSearch() {}

  /**
   * One round-robin run.
   *
   * @param offeredRps requests per second over the middle half of the arrivals
   * @param arrivalRps requests over the whole arrival span
   * @param completedRps completed requests from the first arrival to the last completion
   * @param utilisation offered / capacity (NaN only while the search has not found the capacity yet)
   * @param keepsUp completedRps at least {@value #OVERLOAD_SHARE} of arrivalRps
   * @param drainSeconds from the last arrival to the last completion
   */
  public record Probe(String spec, double knob, int requests, double offeredRps, double arrivalRps,
      double completedRps, double utilisation, boolean keepsUp, double drainSeconds, double ttftP50Ms,
      double ttftP99Ms, double e2eP50Ms, double servedShare, int failed) {

    Probe withUtilisation(double u) {
      return new Probe(spec, knob, requests, offeredRps, arrivalRps, completedRps, u, keepsUp, drainSeconds,
          ttftP50Ms, ttftP99Ms, e2eP50Ms, servedShare, failed);
    }
  }

  /**
   * @param baseSpec the spec as given
   * @param knob the option that scales its load
   * @param capacityRps round-robin's capacity μ, requests per second
   * @param overload the probes of the search, in order
   * @param points one operating point per target utilisation, in the order asked
   * @param curve round-robin at each utilisation of the curve, for context
   */
  public record Result(String baseSpec, String knob, double capacityRps, List<Probe> overload,
      List<OperatingPoint> points, List<Probe> curve) {}

  /** The spec that offers {@code utilisation} × capacity, and the offered rate it reached. */
  public record OperatingPoint(double utilisation, String spec, double knob, double offeredRps) {}

  /**
   * Finds round-robin's capacity on {@code spec} and the specs at each of {@code targets}, chat prompts sent through
   * the request path of {@code chat} (the model's template, tokenizer and media expansion), as the A/B then sends
   * them.
   *
   * @param targets utilisations in (0, 2] for the A/B
   * @param curve utilisations at which to run round-robin for the record (may be empty)
   * @param chat the request path for chat prompts, or null to probe with their token stand-ins
   */
  public static Result find(String spec, VirtualSetup setup, List<Double> targets, List<Double> curve,
      ChatFront chat, PrintStream progress) {
    Objects.requireNonNull(spec, "spec");
    for (double t : targets) {
      if (!(t > 0 && t <= 2)) {
        throw new IllegalArgumentException("a target utilisation must be in (0, 2], was " + t);
      }
    }
    String knob = WorkloadCatalog.loadKnob(spec);
    double base = knobValue(spec, knob);
    List<Probe> probes = new ArrayList<>();
    double capacity = 0;
    int overloadedInARow = 0;
    double k = base;
    for (int i = 0; i <= MAX_DOUBLINGS && overloadedInARow < 2; i++, k *= 2) {
      Probe p = probe(WorkloadCatalog.withLoad(spec, format(k)), k, setup, chat, Double.NaN);
      probes.add(p);
      progress.printf(Locale.ROOT, "  search %s=%s: %d requests arrive at %.1f req/s, complete at %.1f req/s%s, "
              + "RR TTFT p50 %.1f ms%n", knob, format(k), p.requests(), p.arrivalRps(), p.completedRps(),
          p.keepsUp() ? "" : " (overloaded)", p.ttftP50Ms());
      if (p.keepsUp()) {
        overloadedInARow = 0;
        capacity = 0;
      } else {
        overloadedInARow++;
        capacity = Math.max(capacity, p.completedRps());
      }
    }
    if (overloadedInARow < 2) {
      throw new IllegalStateException("round-robin kept up with " + spec + " at " + knob + "=" + format(k / 2)
          + "; no overload within " + MAX_DOUBLINGS + " doublings");
    }
    progress.printf(Locale.ROOT, "  round-robin capacity %.1f req/s%n", capacity);
    List<Probe> searched = new ArrayList<>();
    for (Probe p : probes) {
      searched.add(p.withUtilisation(round(p.offeredRps() / capacity)));
    }
    List<OperatingPoint> points = new ArrayList<>();
    for (double t : targets) {
      points.add(solve(spec, knob, base, t, capacity));
    }
    List<Probe> curvePoints = new ArrayList<>();
    for (double u : curve) {
      OperatingPoint op = solve(spec, knob, base, u, capacity);
      Probe p = probe(op.spec(), op.knob(), setup, chat, op.offeredRps() / capacity);
      curvePoints.add(p);
      progress.printf(Locale.ROOT, "  curve rho %.2f (%s=%s, %.1f req/s): RR TTFT p50 %.1f ms p99 %.1f ms, "
              + "E2E p50 %.1f ms, drain %.1f s%n", p.utilisation(), knob, format(op.knob()), p.offeredRps(),
          p.ttftP50Ms(), p.ttftP99Ms(), p.e2eP50Ms(), p.drainSeconds());
    }
    return new Result(spec, knob, round(capacity), searched, points, curvePoints);
  }

  /** The knob value whose workload offers {@code utilisation} × {@code capacity}. */
  static OperatingPoint solve(String spec, String knob, double base, double utilisation, double capacity) {
    double target = utilisation * capacity;
    double k = base;
    double offered = offeredRate(WorkloadCatalog.create(WorkloadCatalog.withLoad(spec, format(k))));
    for (int i = 0; i < MAX_RESCALES && Math.abs(offered / target - 1) > RATE_TOLERANCE; i++) {
      k = roundKnob(k * target / offered);
      offered = offeredRate(WorkloadCatalog.create(WorkloadCatalog.withLoad(spec, format(k))));
    }
    return new OperatingPoint(utilisation, WorkloadCatalog.withLoad(spec, format(k)), k, round(offered));
  }

  private static Probe probe(String spec, double knob, VirtualSetup setup, ChatFront chat, double utilisation) {
    Workload w = WorkloadCatalog.create(spec);
    if (w.size() > MAX_PROBE_REQUESTS) {
      throw new IllegalStateException(spec + " has " + w.size() + " requests, over the search's bound of "
          + MAX_PROBE_REQUESTS + " (a multi-turn workload grows with its rate: give it fewer sessions)");
    }
    VirtualOutcome o = VirtualRun.run(w, POLICY, setup, chat);
    PolicyResult r = PolicyResult.summarize(o.data(), null);
    long first = w.requests().isEmpty() ? 0 : w.requests().get(0).arrivalMicros();
    double arrivalSpan = (w.spanMicros() - first) / 1e6;
    double arrival = arrivalSpan > 0 ? (w.size() - 1) / arrivalSpan : Double.POSITIVE_INFINITY;
    long lastEnd = lastCompletion(o.data().requests());
    int completed = r.counts().completed();
    double completedRps = lastEnd > first ? completed / ((lastEnd - first) / 1e6) : 0;
    return new Probe(spec, knob, w.size(), round(offeredRate(w)), round(arrival), round(completedRps),
        Double.isNaN(utilisation) ? Double.NaN : round(utilisation), completedRps >= OVERLOAD_SHARE * arrival,
        round(Math.max(0, lastEnd - w.spanMicros()) / 1e6), r.ttftMs().p50(), r.ttftMs().p99(), r.e2eMs().p50(),
        r.cache().servedShare(), r.counts().failed());
  }

  /** The latest end of a completed request, microseconds from the start of the run; 0 if none completed. */
  static long lastCompletion(List<RequestRecord> requests) {
    long last = 0;
    for (RequestRecord r : requests) {
      if (r.ok() && r.sentMicros() >= 0 && r.e2eMicros() >= 0) {
        last = Math.max(last, r.sentMicros() + r.e2eMicros());
      }
    }
    return last;
  }

  /** Requests per second across the middle half of the workload's arrivals. */
  public static double offeredRate(Workload w) {
    long[] t = new long[w.size()];
    int i = 0;
    for (WorkloadRequest r : w.requests()) {
      t[i++] = r.arrivalMicros();
    }
    return middleRate(t);
  }

  /** Events per second between the 25th- and 75th-percentile instants; 0 with fewer than 4 instants. */
  static double middleRate(long[] instantsMicros) {
    int n = instantsMicros.length;
    if (n < 4) {
      return 0;
    }
    long[] t = instantsMicros.clone();
    Arrays.sort(t);
    int lo = n / 4;
    int hi = (3 * n) / 4;
    long span = t[hi] - t[lo];
    return span <= 0 ? Double.POSITIVE_INFINITY : (hi - lo) / (span / 1e6);
  }

  private static double knobValue(String spec, String knob) {
    Object v = WorkloadCatalog.create(spec).params().get(knob);
    if (!(v instanceof Number n)) {
      throw new IllegalArgumentException("workload " + spec + " has no numeric " + knob + " option");
    }
    return n.doubleValue();
  }

  /** Four significant digits: readable specs, offered rate within 0.05% of the exact solution. */
  static double roundKnob(double v) {
    return new BigDecimal(v).round(new MathContext(4)).doubleValue();
  }

  static String format(double v) {
    return new BigDecimal(v).round(new MathContext(6)).stripTrailingZeros().toPlainString();
  }

  private static double round(double v) {
    return Math.round(v * 1000) / 1000.0;
  }
}
