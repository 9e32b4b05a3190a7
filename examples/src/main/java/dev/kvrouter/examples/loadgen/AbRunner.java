package dev.kvrouter.examples.loadgen;

import dev.kvrouter.examples.report.AbReport;
import dev.kvrouter.examples.report.MarkdownReport;
import dev.kvrouter.examples.report.PolicyResult;
import dev.kvrouter.examples.report.ReportJson;
import dev.kvrouter.examples.report.ReportWriter;
import dev.kvrouter.examples.report.RunData;
import dev.kvrouter.examples.report.WorkloadResult;
import dev.kvrouter.examples.workload.IdealReuse;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * Runs the same workloads (same seed, same requests) once per routing policy against one target and writes
 * the report. Per policy: wait for the workers to go idle and reset every worker's prefix cache
 * ({@code POST /reset_prefix_cache}, retried when refused; a reset that never takes ends the A/B), so no policy
 * inherits another's cache; let the {@link PolicyPreparer} ready the stack
 * and fill the run's context; run the driver ({@link LoadGenerator}: open loop, conversations closed loop) with the
 * policy in the trusted {@code x-kvrouter-policy} header (unless disabled); summarize. The report is rewritten
 * after every run, so an interrupted A/B keeps what it measured.
 *
 * <pre>
 * java -cp examples/target/classes:... dev.kvrouter.examples.loadgen.AbRunner \
 *     --target http://127.0.0.1:10000 --model Qwen/Qwen3-8B --workers workers.yaml \
 *     --workload 'system-prompt:sharing=0|0.3|0.6|0.9' --workload mooncake:block=64,max=500 \
 *     --policies kv_aware,round_robin,least_load,cache_only,random --block-size 16 --out target/ab
 * </pre>
 */
public final class AbRunner {

  public static final String POLICY_HEADER = "x-kvrouter-policy";
  public static final List<String> DEFAULT_POLICIES =
      List.of("kv_aware", "round_robin", "least_load", "cache_only", "random");
  private static final int RESET_ATTEMPTS = 5;
  private static final Duration RESET_TIME = Duration.ofSeconds(30);
  private static final Duration RESET_PAUSE = Duration.ofMillis(500);

  /**
   * @param policies policy names, in run order; sent as {@code x-kvrouter-policy} when {@code policyHeader}
   * @param ours the policy under test (first row of every table)
   * @param baseline the policy ratios are taken against
   * @param blockSize the workers' KV block size, for the ideal reuse
   * @param resetCaches reset every worker's prefix cache before each run
   * @param settle pause after the reset, so the router's index sees the clear events first
   * @param idleTimeout how long to wait for the workers to finish earlier work before a run
   * @param outDir where report.json, report.md and charts/ go
   * @param meta what the report should say about how it was made (command, fleet, versions)
   * @param warmupRequests requests of the first workload sent once under {@code ours} before anything is measured
   *     (results discarded, caches reset after): a fresh router JVM otherwise charges its JIT warm-up to
   *     whichever policy runs first
   * @param idealReuse the ideal reuse of a workload (as sent: capped by the run's limits) to report beside what
   *     the workers served, or null for {@link Workload#idealReuse} at {@code blockSize} (its token ids, chat
   *     prompts by their stand-in); the through-Envoy A/B passes the prompts as the workers prefill them
   * @param warmupEveryPolicy send the warm-up once under every policy, in run order, instead of once under
   *     {@code ours}: on a box whose few cores the router, Envoy and the workers share, the whole stack keeps
   *     compiling for several hundred requests, and a short A/B's first policy then pays for it (the demo's
   *     kv_aware, run first, measured 16 ms in front of the engines against cache-only's 10 ms run fourth)
   */
  public record Settings(List<String> policies, String ours, String baseline, boolean policyHeader, int blockSize,
      boolean resetCaches, Duration settle, Duration idleTimeout, Path outDir, Map<String, Object> meta,
      int warmupRequests, Function<Workload, IdealReuse> idealReuse, boolean warmupEveryPolicy) {

    public Settings(List<String> policies, String ours, String baseline, boolean policyHeader, int blockSize,
        boolean resetCaches, Duration settle, Duration idleTimeout, Path outDir, Map<String, Object> meta,
        int warmupRequests, Function<Workload, IdealReuse> idealReuse) {
      this(policies, ours, baseline, policyHeader, blockSize, resetCaches, settle, idleTimeout, outDir, meta,
          warmupRequests, idealReuse, false);
    }

    /** The same settings, the warm-up sent under every policy in run order. */
    public Settings warmingEveryPolicy() {
      return new Settings(policies, ours, baseline, policyHeader, blockSize, resetCaches, settle, idleTimeout,
          outDir, meta, warmupRequests, idealReuse, true);
    }

    public Settings(List<String> policies, String ours, String baseline, boolean policyHeader, int blockSize,
        boolean resetCaches, Duration settle, Duration idleTimeout, Path outDir, Map<String, Object> meta) {
      this(policies, ours, baseline, policyHeader, blockSize, resetCaches, settle, idleTimeout, outDir, meta, 0,
          null);
    }

    IdealReuse idealOf(Workload w) {
      return idealReuse == null ? w.idealReuse(blockSize) : idealReuse.apply(w);
    }

    public Settings {
      if (warmupRequests < 0) {
        throw new IllegalArgumentException("warmupRequests must be >= 0");
      }
      policies = List.copyOf(policies);
      if (policies.isEmpty()) {
        throw new IllegalArgumentException("no policies to compare");
      }
      Objects.requireNonNull(outDir, "outDir");
      meta = new LinkedHashMap<>(meta);
      if (blockSize < 1) {
        throw new IllegalArgumentException("blockSize must be >= 1");
      }
    }
  }

  private final LoadGenerator generator;
  private final List<WorkerTarget> workers;
  private final Settings settings;
  private final PolicyPreparer preparer;
  private final PrintStream progress;

  public AbRunner(LoadGenerator generator, List<WorkerTarget> workers, Settings settings, PolicyPreparer preparer,
      PrintStream progress) {
    this.generator = generator;
    this.workers = List.copyOf(workers);
    this.settings = settings;
    this.preparer = preparer;
    this.progress = progress;
  }

  /** Runs every spec (sweeps expanded, see {@link WorkloadCatalog#expand}) under every policy. */
  public AbReport run(List<String> specs) throws Exception {
    List<WorkloadResult> sections = new ArrayList<>();
    AbReport report = null;
    for (String raw : specs) {
      for (String spec : WorkloadCatalog.expand(raw)) {
        Workload w = fit(WorkloadCatalog.create(spec));
        IdealReuse ideal = settings.idealOf(w);
        progress.printf(Locale.ROOT, "workload %s: %d requests over %.1f s, ideal reuse %.1f%%%n", spec, w.size(),
            w.spanMicros() / 1e6, ideal.tokenShare() * 100);
        List<PolicyResult> results = new ArrayList<>();
        if (sections.isEmpty() && settings.warmupRequests() > 0) {
          Workload head = w.head(settings.warmupRequests());
          if (head.size() > 0) { // the head keeps whole sibling groups (Workload.head), so it may be empty
            warmUp(head);
          }
        }
        for (String policy : settings.policies()) {
          results.add(runOne(policy, w, ideal));
          List<WorkloadResult> partial = new ArrayList<>(sections);
          partial.add(WorkloadResult.of(spec, w, ideal, results));
          report = report(partial);
          ReportJson.write(report, settings.outDir().resolve("report.json"));
          Files.writeString(settings.outDir().resolve("report.md"), MarkdownReport.render(report));
        }
        sections.add(WorkloadResult.of(spec, w, ideal, results));
      }
    }
    report = report(sections);
    List<Path> files = ReportWriter.writeAll(report, settings.outDir());
    progress.println("report: " + files.get(0).toAbsolutePath() + " (+" + (files.size() - 1) + " files)");
    return report;
  }

  /**
   * The workload the driver will actually send: capped by its request count, rounded down to whole sibling groups
   * ({@link Workload#head}), and by its run time (siblings arrive together, so that cut keeps groups whole too).
   */
  Workload fit(Workload w) {
    LoadConfig c = generator.config();
    Workload capped = w.head(c.maxRequests());
    if (capped.size() == 0 && w.size() > 0) {
      throw new IllegalArgumentException("--max-requests " + c.maxRequests() + " is smaller than the first group of "
          + "siblings of " + w.name() + ", which is sent whole or not at all");
    }
    return capped.until(c.maxRunTime().toNanos() / 1000 + 1);
  }

  private void warmUp(Workload head) throws Exception {
    List<String> under = settings.warmupEveryPolicy() ? settings.policies()
        : List.of(settings.ours() == null ? settings.policies().get(0) : settings.ours());
    for (String policy : under) {
      progress.printf(Locale.ROOT, "  warm-up: %d requests under %s (not measured)%n", head.size(), policy);
      generator.run(head, context(policy).build());
    }
  }

  /** A run under {@code policy}: these workers, and the trusted policy header when the runner sets it. */
  private RunContext.Builder context(String policy) {
    RunContext.Builder b = RunContext.builder(policy).workers(workers);
    if (settings.policyHeader()) {
      b.header(POLICY_HEADER, policy);
    }
    return b;
  }

  private PolicyResult runOne(String policy, Workload w, IdealReuse ideal) throws Exception {
    // idle first: vLLM and the simulator refuse a reset while requests hold blocks
    if (!generator.metrics().awaitIdle(workers, settings.idleTimeout())) {
      progress.println("warning: workers still busy after " + settings.idleTimeout() + "; starting anyway");
    }
    if (settings.resetCaches()) {
      resetCaches();
    }
    RunContext ctx = preparer.prepare(policy, w, context(policy));
    RunData data = generator.run(w, ctx);
    PolicyResult r = PolicyResult.summarize(data, ideal);
    progress.printf(Locale.ROOT,
        "  %-12s TTFT p50 %9.1f ms  p99 %9.1f ms  E2E p50 %9.1f ms  cache %5.1f%% (ideal %5.1f%%)  "
            + "imbalance %.2f  errors %d%n",
        policy, r.ttftMs().p50(), r.ttftMs().p99(), r.e2eMs().p50(), r.cache().servedShare() * 100,
        r.cache().idealShare() * 100, r.balance().requestImbalance(), r.counts().failed());
    if (r.engineTtft() != null) {
      PolicyResult.EngineTtft e = r.engineTtft();
      progress.printf(Locale.ROOT,
          "    TTFT mean %.1f ms at the client,%s %.1f ms at the engines (%.1f ms in front of them%s)%n",
          r.ttftMs().mean(), e.simServerMs() == null ? ""
              : String.format(Locale.ROOT, " %.1f ms at the workers' HTTP servers,", e.simServerMs()),
          e.meanMs(), e.frontMs(), e.simLateMs() == null ? ""
              : String.format(Locale.ROOT, ", %.1f of it the simulated engines' lateness", e.simLateMs()));
    }
    for (String n : data.notes()) {
      if (n.startsWith("closed loop:") || n.startsWith("model answers:")) {
        progress.println("    " + n);
      }
    }
    return r;
  }

  /**
   * Resets every worker's prefix cache, retrying a refusal (a worker that still had work, or took new work since it
   * was seen idle) after waiting for idle again. A reset that never takes ends the A/B: the next policy would start
   * on the previous one's cache and its figures would not compare.
   */
  private void resetCaches() throws InterruptedException {
    long deadline = System.nanoTime() + RESET_TIME.toNanos();
    for (WorkerTarget w : workers) {
      String last = null;
      for (int attempt = 1; attempt <= RESET_ATTEMPTS; attempt++) {
        if (attempt > 1) {
          long left = deadline - System.nanoTime();
          if (left <= 0) {
            break;
          }
          Thread.sleep(Math.min(RESET_PAUSE.toMillis(), left / 1_000_000));
          generator.metrics().awaitIdle(List.of(w), Duration.ofNanos(Math.max(0, deadline - System.nanoTime())));
        }
        HttpRequest req = HttpRequest.newBuilder(URI.create(w.baseUri() + "/reset_prefix_cache"))
            .timeout(Duration.ofSeconds(10)).POST(HttpRequest.BodyPublishers.noBody()).build();
        try {
          HttpResponse<String> res = generator.http().sendAsync(req, HttpResponse.BodyHandlers.ofString())
              .get(15, TimeUnit.SECONDS);
          if (res.statusCode() / 100 == 2) {
            last = null;
            break;
          }
          last = "answered " + res.statusCode() + (res.body().isBlank() ? "" : ": " + abbreviate(res.body()));
          if (res.statusCode() == 404 || res.statusCode() == 405) {
            // no such endpoint (vLLM serves it only with VLLM_SERVER_DEV_MODE=1): asking again will not help
            break;
          }
        } catch (InterruptedException e) {
          throw e;
        } catch (Exception e) {
          last = "failed: " + WorkerMetrics.rootMessage(e);
        }
        progress.println("warning: " + w.name() + " /reset_prefix_cache " + last + " (attempt " + attempt + ")");
      }
      if (last != null) {
        throw new IllegalStateException(w.name() + " /reset_prefix_cache " + last + "; gave up (at most "
            + RESET_ATTEMPTS + " attempts in " + RESET_TIME.toSeconds() + " s), since the next run would start on"
            + " the previous run's cache. Pass --reset-caches false to compare without resetting.");
      }
    }
    if (!settings.settle().isZero()) {
      Thread.sleep(settings.settle().toMillis());
    }
  }

  private static String abbreviate(String body) {
    String b = body.strip();
    return b.length() <= 200 ? b : b.substring(0, 200) + "...";
  }

  private AbReport report(List<WorkloadResult> sections) {
    Map<String, Object> meta = new LinkedHashMap<>(settings.meta());
    meta.put("policies", settings.policies());
    meta.put("blockSize", settings.blockSize());
    meta.put("workers", workers.stream().map(WorkerTarget::name).toList());
    LoadConfig c = generator.config();
    meta.put("target", c.target().toString());
    meta.put("model", c.model());
    meta.put("maxInFlight", c.maxInFlight());
    meta.put("maxRunSeconds", c.maxRunTime().toSeconds());
    return new AbReport(AbReport.SCHEMA, Instant.now().toString(), meta, settings.ours(), settings.baseline(),
        sections);
  }

  public static void main(String[] args) throws Exception {
    Map<String, List<String>> opt = parse(args);
    if (opt.containsKey("help") || !opt.containsKey("target")) {
      System.out.println(USAGE);
      System.exit(opt.containsKey("help") ? 0 : 2);
    }
    URI target = URI.create(one(opt, "target", null));
    LoadConfig load = LoadConfig.defaults(target, one(opt, "model", "kvrouter/model"))
        .withMaxInFlight(Integer.parseInt(one(opt, "max-in-flight", "512")))
        .withMaxRunTime(Duration.ofSeconds(Long.parseLong(one(opt, "max-seconds", "600"))))
        .withMaxRequests(Integer.parseInt(one(opt, "max-requests", "0")))
        .withTimeouts(Duration.ofSeconds(Long.parseLong(one(opt, "request-timeout", "300"))),
            Duration.ofSeconds(Long.parseLong(one(opt, "drain-seconds", "60"))))
        .withSampleInterval(Duration.ofMillis(Long.parseLong(one(opt, "sample-ms", "250"))));
    List<WorkerTarget> workers = new ArrayList<>();
    if (opt.containsKey("workers")) {
      workers.addAll(WorkerTarget.fromWorkersFile(Path.of(one(opt, "workers", null))));
    }
    for (String w : opt.getOrDefault("worker", List.of())) {
      workers.add(WorkerTarget.parse(w));
    }
    List<String> policies = List.of(one(opt, "policies", String.join(",", DEFAULT_POLICIES)).split(","));
    String seed = one(opt, "seed", "1");
    List<String> specs = new ArrayList<>();
    for (String s : opt.getOrDefault("workload", List.of("system-prompt"))) {
      specs.add(withSeed(s, seed));
    }
    Map<String, Object> meta = new LinkedHashMap<>();
    meta.put("command", "AbRunner " + String.join(" ", args));
    meta.put("seed", seed);
    meta.put("java", System.getProperty("java.version"));
    meta.put("cpus", Runtime.getRuntime().availableProcessors());
    Settings settings = new Settings(policies, one(opt, "ours", policies.get(0)), one(opt, "baseline", "round_robin"),
        !"none".equals(one(opt, "policy-mode", "header")), Integer.parseInt(one(opt, "block-size", "16")),
        Boolean.parseBoolean(one(opt, "reset-caches", "true")),
        Duration.ofMillis(Long.parseLong(one(opt, "settle-ms", "1000"))), Duration.ofSeconds(60),
        Path.of(one(opt, "out", "target/ab")), meta);
    try (LoadGenerator gen = new LoadGenerator(load)) {
      new AbRunner(gen, workers, settings, PolicyPreparer.none(), System.out).run(specs);
    }
  }

  /** Adds {@code seed=} to a spec that has none, so one flag seeds every workload. */
  public static String withSeed(String spec, String seed) {
    if (spec.matches(".*[:,]\\s*seed\\s*=.*")) {
      return spec;
    }
    return spec + (spec.contains(":") ? "," : ":") + "seed=" + seed;
  }

  private static final String USAGE = """
      usage: AbRunner --target URL [options]
        --target URL            Envoy listener (or one worker), e.g. http://127.0.0.1:10000
        --model NAME            model field of every request (default kvrouter/model)
        --workload SPEC         repeatable; name[:k=v,...], a|b|c values sweep; names: %s
        --policies A,B,...      default %s
        --ours P --baseline P   table order and ratio base (default: first policy, round_robin)
        --policy-mode header|none   send x-kvrouter-policy (default header)
        --workers FILE          workers.yaml to scrape /metrics and reset caches; or --worker name=URL (repeatable)
        --block-size N          KV block size for the ideal reuse (default 16)
        --seed N                seed for specs without one (default 1)
        --max-in-flight N --max-seconds S --max-requests N --request-timeout S --drain-seconds S --sample-ms MS
        --reset-caches true|false --settle-ms MS
        --out DIR               default target/ab
      """.formatted(WorkloadCatalog.names(), String.join(",", DEFAULT_POLICIES));

  private static Map<String, List<String>> parse(String[] args) {
    Map<String, List<String>> m = new LinkedHashMap<>();
    for (int i = 0; i < args.length; i++) {
      if (!args[i].startsWith("--")) {
        throw new IllegalArgumentException("unexpected argument " + args[i]);
      }
      String k = args[i].substring(2);
      String v = i + 1 < args.length && !args[i + 1].startsWith("--") ? args[++i] : "true";
      m.computeIfAbsent(k, x -> new ArrayList<>()).add(v);
    }
    return m;
  }

  private static String one(Map<String, List<String>> m, String k, String def) {
    List<String> v = m.get(k);
    return v == null ? def : v.get(v.size() - 1);
  }
}
