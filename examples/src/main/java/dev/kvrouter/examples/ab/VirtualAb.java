package dev.kvrouter.examples.ab;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.kvrouter.examples.loadgen.AbRunner;
import dev.kvrouter.examples.report.AbReport;
import dev.kvrouter.examples.report.MarkdownReport;
import dev.kvrouter.examples.report.PolicyResult;
import dev.kvrouter.examples.report.ReportJson;
import dev.kvrouter.examples.report.ReportWriter;
import dev.kvrouter.examples.report.WorkloadResult;
import dev.kvrouter.examples.sim.events.EventFaults;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.examples.workload.AnswerReuse;
import dev.kvrouter.examples.workload.IdealReuse;
import dev.kvrouter.examples.workload.PromptIds;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.examples.workload.WorkloadRequest;
import dev.kvrouter.index.wire.WireLayout;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.function.Function;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The A/B in virtual time: every workload under every policy, same seed, same requests, against simulated vLLM
 * engines driven by the router's own code ({@link VirtualRun}), plus optional event-fault sweeps. Writes the
 * same report as the A/B through Envoy ({@code report.json}, {@code report.md}, {@code charts/}) and
 * {@code virtual.json} with what only an in-process run checks exactly (truth check, ledger at the end, router
 * CPU, event plane, wall time).
 *
 * <pre>
 * java -cp ... dev.kvrouter.examples.ab.VirtualAb --workload mooncake:speed=4 \
 *     --workload 'system-prompt:format=tokens,sharing=0|0.5|0.9' --out bench/results/ab/virtual
 * </pre>
 *
 * <p>With {@code --saturate 0.9,0.5} each workload's load is not the spec's own: {@link SaturationSearch} first
 * measures round-robin's capacity on it, and the A/B runs at each listed share of that capacity (the issue's
 * "load where round-robin is near saturation" is 0.9); {@code saturation.json} keeps the search. With
 * {@code --tokenizer} the search's probes go through the request path as the A/B's runs do.
 *
 * <p>Images: {@code --multimodal gemma3} (with the model's {@code --tokenizer}) configures the router's model entry
 * with {@code multimodal: {preset: gemma3}} and the workers with the same expansion, for workloads such as
 * {@code image-qa}. The timing preset times image tokens as text tokens (no vision encoder cost).
 */
@Command(name = "virtual-ab", mixinStandardHelpOptions = true,
    description = "A/B of routing policies in virtual time against simulated vLLM workers.")
public final class VirtualAb implements Callable<Integer> {

  @Option(names = "--workload", required = true,
      description = "Workload spec, repeatable; a|b|c values sweep (see WorkloadCatalog).")
  List<String> workloads;

  @Option(names = "--policies", split = ",",
      defaultValue = "kv_aware,round_robin,least_load,cache_only,random")
  List<String> policies;

  @Option(names = "--ours", defaultValue = "kv_aware")
  String ours;

  @Option(names = "--baseline", defaultValue = "round_robin")
  String baseline;

  @Option(names = "--workers", defaultValue = "8")
  int workers;

  @Option(names = "--preset", defaultValue = "llama3.1-8b-h100")
  String preset;

  @Option(names = "--model", description = "Served model name (default: the preset's model).")
  String model;

  @Option(names = "--block-size", defaultValue = "16")
  int blockSize;

  @Option(names = "--num-gpu-blocks", defaultValue = "0", description = "KV blocks per worker (0 = the preset's).")
  int numGpuBlocks;

  @Option(names = "--max-num-seqs", defaultValue = "0",
      description = "Requests running at once per engine (0 = vLLM's default on the preset's GPU: 1024 on H100, 256 "
          + "on A100).")
  int maxNumSeqs;

  @Option(names = "--max-num-batched-tokens", defaultValue = "0",
      description = "Token budget per engine step (0 = vLLM's default on the preset's GPU: 8192 on H100, 2048 on "
          + "A100).")
  int maxNumBatchedTokens;

  @Option(names = "--kv-offloading-size", defaultValue = "0",
      description = "GiB of vLLM native CPU offload per worker (0 = off).")
  double kvOffloadingSize;

  @Option(names = "--layout", defaultValue = "vllm_map",
      description = "Event wire layout: vllm_map | vllm_array | sglang_array | none (apply records directly).")
  String layout;

  @Option(names = "--replay-steps", defaultValue = "10000", description = "Replay buffer per engine, 0 = no replay.")
  int replaySteps;

  @Option(names = "--stale-view-trust", negatable = true, defaultValue = "true", fallbackValue = "true",
      description = "The router's events.stale_view_trust: credit a stale view as far as usage reports confirm it "
          + "(--no-stale-view-trust: nothing until it recovers).")
  boolean staleViewTrust;

  @Option(names = "--event-delay-ms", split = ",", defaultValue = "0",
      description = "Event delivery delay; several values sweep.")
  List<Long> delays;

  @Option(names = "--event-drop", split = ",", defaultValue = "0",
      description = "Event batch drop rate in [0, 1]; several values sweep.")
  List<Double> drops;

  @Option(names = "--scrape-ms", defaultValue = "250", description = "Load scrape interval, 0 = ledger only.")
  long scrapeMs;

  @Option(names = "--router-replicas", defaultValue = "1",
      description = "Router replicas behind the proxy, each with its own index, predictions, ledger and scrapes; "
          + "requests are dealt to them in turn, as Envoy's round-robin ext_proc cluster does.")
  int routerReplicas;

  @Option(names = "--replica-sync-ms", defaultValue = "-1",
      description = "With --router-replicas > 1: the replicas share reservations and predictions (kvrouter.yaml "
          + "replicas:), delivered this many ms after they happen; -1 (default): they share nothing.")
  double replicaSyncMs;

  @Option(names = "--sample-ms", defaultValue = "250")
  long sampleMs;

  @Option(names = "--weights", description = "x-kvrouter-weights override for every request.")
  String weights;

  @Option(names = "--tokenizer",
      description = "Tokenizer directory: chat workloads are rendered and tokenized by the request path.")
  Path tokenizer;

  @Option(names = "--multimodal", paramLabel = "PRESET",
      description = "The served model takes images, expanded as the router's `multimodal: {preset: PRESET}` (e.g. "
          + "gemma3; needs --tokenizer of that model): the router's model entry and the workers use the same spec.")
  String multimodal;

  @Option(names = "--miss-breakdown", description = "Classify every prompt block each policy computed (on another "
      + "worker, known or not to the router; evicted fleet-wide; cold) and sample duplication; into virtual.json "
      + "(missBreakdown) and the run's notes. Off by default: a cache lookup per prompt block per worker.")
  boolean missBreakdown;

  @Option(names = "--seed", defaultValue = "1")
  long seed;

  @Option(names = "--charts", defaultValue = "true", negatable = true, fallbackValue = "true")
  boolean charts;

  @Option(names = "--decisions",
      description = "Write the router's decision records (JSON lines) of every run to DIR/<n>-<policy>.jsonl.")
  Path decisions;

  @Option(names = "--out", defaultValue = "target/ab-virtual")
  Path out;

  @Option(names = "--saturate", split = ",",
      description = "Utilisations of round-robin's capacity, e.g. 0.9,0.5: each workload's load knob (rate, or "
          + "speed for mooncake) is first searched (SaturationSearch) and the A/B runs at each utilisation instead "
          + "of the spec's own load. Writes saturation.json.")
  List<Double> saturate;

  @Option(names = "--saturation-curve", split = ",", defaultValue = "0.5,0.7,0.8,0.9,1.0",
      description = "Utilisations at which round-robin alone is run and recorded beside the search (the knee).")
  List<Double> saturationCurve;

  @Option(names = "--search-only", description = "With --saturate: search and write saturation.json, no A/B.")
  boolean searchOnly;

  /** Section label suffix per spec (the utilisation it was chosen for). */
  private final Map<String, String> specNotes = new LinkedHashMap<>();

  public static void main(String[] args) {
    if (System.getProperty("logback.configurationFile") == null) {
      System.setProperty("logback.configurationFile", "sim-logback.xml");
    }
    System.exit(new CommandLine(new VirtualAb()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    VirtualSetup base = VirtualSetup.defaults().withWorkers(workers).withPreset(Presets.byId(preset))
        .withBlockSize(blockSize).withNumGpuBlocks(numGpuBlocks).withEngineLimits(maxNumSeqs, maxNumBatchedTokens)
        .withWeights(weights).withSeed(seed)
        .withScrapeInterval(Duration.ofMillis(scrapeMs)).withKvOffloadingSize(kvOffloadingSize)
        .withRouterReplicas(routerReplicas)
        .withReplicaSync(replicaSyncMs < 0 ? null : Duration.ofNanos(Math.round(replicaSyncMs * 1e6)));
    if (model != null) {
      base = base.withModel(model);
    }
    if (multimodal != null) {
      if (tokenizer == null) {
        throw new CommandLine.ParameterException(new CommandLine(this),
            "--multimodal needs --tokenizer (the multimodal model's tokenizer expands its media)");
      }
      base = base.withMultimodal(multimodal);
    }
    base = base.withSampleInterval(Duration.ofMillis(sampleMs)).withStaleViewTrust(staleViewTrust);
    WireLayout wl = layout.equalsIgnoreCase("none") ? null : WireLayout.valueOf(layout.toUpperCase(Locale.ROOT));
    List<String> specs = new ArrayList<>();
    for (String s : workloads) {
      specs.addAll(WorkloadCatalog.expand(AbRunner.withSeed(s, Long.toString(seed))));
    }
    Map<String, Object> meta = new LinkedHashMap<>();
    meta.put("mode", "virtual-time");
    meta.put("command", "VirtualAb " + String.join(" ", ProcessHandle.current().info().arguments()
        .map(a -> List.of(a)).orElse(List.of())));
    meta.put("seed", seed);
    meta.put("workers", workers);
    meta.put("preset", preset);
    meta.put("numGpuBlocks", base.engineConfig(0).numGpuBlocks());
    meta.put("blockSize", blockSize);
    meta.put("maxNumSeqs", base.engineConfig(0).maxNumSeqs());
    meta.put("maxNumBatchedTokens", base.engineConfig(0).maxNumBatchedTokens());
    meta.put("kvOffloadingSizeGib", kvOffloadingSize);
    meta.put("numCpuBlocks", base.engineConfig(0).numCpuBlocks());
    meta.put("policies", policies);
    meta.put("eventLayout", layout);
    meta.put("replaySteps", replaySteps);
    meta.put("staleViewTrust", staleViewTrust);
    meta.put("scrapeMs", scrapeMs);
    meta.put("routerReplicas", routerReplicas);
    meta.put("replicaSyncMs", replicaSyncMs < 0 ? null : replicaSyncMs);
    meta.put("weights", weights);
    meta.put("multimodal", multimodal);
    meta.put("tokenizer", tokenizer == null ? null : tokenizer.toString());
    meta.put("java", System.getProperty("java.version"));
    meta.put("cpus", Runtime.getRuntime().availableProcessors());
    meta.put("loadAverageAtStart", java.lang.management.ManagementFactory.getOperatingSystemMXBean()
        .getSystemLoadAverage());
    try (ChatFront chat = tokenizer == null ? null
        : ChatFront.load(base.model(), tokenizer, blockSize, base.multimodalSpec())) {
      if (saturate != null && !saturate.isEmpty()) {
        // with --tokenizer the probes go through the request path too, as the A/B's runs then do
        specs = saturated(specs, base, chat, meta);
        if (searchOnly) {
          return 0;
        }
      }
      AbReport report = run(specs, base, wl, chat, meta, System.out);
      List<Path> files = charts ? ReportWriter.writeAll(report, out) : writeTables(report);
      System.out.println("report: " + files.get(0).toAbsolutePath() + " (+" + (files.size() - 1) + " files)");
    }
    return 0;
  }

  /** Searches every spec's saturation (round-robin), writes saturation.json, returns the specs to run. */
  private List<String> saturated(List<String> specs, VirtualSetup base, ChatFront chat, Map<String, Object> meta)
      throws IOException {
    Files.createDirectories(out);
    List<SaturationSearch.Result> found = new ArrayList<>();
    List<String> chosen = new ArrayList<>();
    for (String spec : specs) {
      System.out.println("saturation search " + spec);
      SaturationSearch.Result r = SaturationSearch.find(spec, base, saturate, saturationCurve, chat, System.out);
      found.add(r);
      for (SaturationSearch.OperatingPoint p : r.points()) {
        System.out.printf(Locale.ROOT, "  rho %.2f: %s (%.1f req/s offered of %.1f)%n", p.utilisation(), p.spec(),
            p.offeredRps(), r.capacityRps());
        chosen.add(p.spec());
        specNotes.put(p.spec(), String.format(Locale.ROOT, " [rho %.2f of round-robin's %.1f req/s]",
            p.utilisation(), r.capacityRps()));
      }
      Map<String, Object> file = new LinkedHashMap<>();
      file.put("definition", "capacity = round-robin's completed requests / (last completion - first arrival), "
          + "the larger of the first two probes in a row (doubling the load knob) that complete at < "
          + SaturationSearch.OVERLOAD_SHARE + " x their arrival rate; operating point = the load knob whose "
          + "workload offers utilisation x capacity, offered = requests/s over the middle half of the arrivals");
      file.put("meta", meta);
      file.put("workloads", found);
      Files.writeString(out.resolve("saturation.json"), new ObjectMapper()
          .enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(file) + "\n");
    }
    meta.put("saturate", saturate);
    return chosen;
  }

  private List<Path> writeTables(AbReport report) throws IOException {
    Files.createDirectories(out);
    ReportJson.write(report, out.resolve("report.json"));
    Files.writeString(out.resolve("report.md"), MarkdownReport.render(report));
    return List.of(out.resolve("report.json"), out.resolve("report.md"));
  }

  /** Runs every spec x fault setting x policy; writes virtual.json as it goes. */
  AbReport run(List<String> specs, VirtualSetup base, WireLayout wl, ChatFront chat, Map<String, Object> meta,
      PrintStream progress) throws IOException {
    List<WorkloadResult> sections = new ArrayList<>();
    List<Map<String, Object>> extras = new ArrayList<>();
    Files.createDirectories(out);
    for (String spec : specs) {
      Workload w = WorkloadCatalog.create(spec);
      boolean chatPrompts = w.chatPrompts();
      // chat prompts are rendered, tokenized and their media expanded once, for both ideals; media blocks are
      // keyed with the engine's identifiers (uuid, or its own content hash)
      Function<WorkloadRequest, PromptIds> tokens = chat != null ? chat.engineIds(w, base.model()) : w::promptIds;
      // scripted chat answers are cached as the engine generated them (text tokens + end of turn), and the next
      // prompt is the re-rendered history: the ideal keeps only what the template keeps
      Function<WorkloadRequest, int[]> answers = chat != null ? chat.engineAnswers(w, base.model()) : w::answerTokens;
      IdealReuse ideal = chat != null && chatPrompts
          ? IdealReuse.compute(w.requests(), tokens, answers, base.blockSize(), Long.MAX_VALUE)
          : w.idealReuse(base.blockSize());
      AnswerReuse answerIdeal = w.scriptsAnswers()
          ? AnswerReuse.compute(w.requests(), tokens, answers, base.blockSize(), null) : null;
      long fleetBlocks = (long) base.engineConfig(0).numGpuBlocks() * workers;
      IdealReuse bounded = IdealReuse.compute(w.requests(), tokens, answers, base.blockSize(), fleetBlocks);
      // with vLLM's CPU tier: it is written on compute (inclusive of what the GPU computed), so a worker holds
      // at most max(GPU, CPU) distinct blocks; the fleet's as one LRU cache
      long fleetTierBlocks = (long) Math.max(base.engineConfig(0).numGpuBlocks(), base.engineConfig(0).numCpuBlocks())
          * workers;
      IdealReuse boundedTiers = fleetTierBlocks == fleetBlocks ? bounded
          : IdealReuse.compute(w.requests(), tokens, answers, base.blockSize(), fleetTierBlocks);
      for (long delay : delays) {
        for (double drop : drops) {
          EventFaults f = new EventFaults(drop, delay, 0, false);
          VirtualSetup setup = base.withEvents(wl, replaySteps, f);
          String label = spec + specNotes.getOrDefault(spec, "") + (delay > 0 ? " [event delay " + delay + " ms]" : "")
              + (drop > 0 ? " [event drop " + drop + (replaySteps > 0 ? ", replay" : ", no replay") + "]" : "");
          progress.printf(Locale.ROOT, "workload %s: %d requests over %.1f s, ideal reuse %.1f%% (infinite cache), "
                  + "%.1f%% (the fleet's %d blocks as one LRU cache)%s%n", label, w.size(), w.spanMicros() / 1e6,
              ideal.tokenShare() * 100, bounded.tokenShare() * 100, fleetBlocks,
              boundedTiers == bounded ? "" : String.format(Locale.ROOT, ", %.1f%% (with the CPU tier, %d blocks)",
                  boundedTiers.tokenShare() * 100, fleetTierBlocks));
          if (answerIdeal != null) {
            progress.printf(Locale.ROOT, "  answers: %s%n", describe(answerIdeal));
          }
          List<PolicyResult> results = new ArrayList<>();
          for (String policy : policies) {
            VirtualOutcome o;
            if (decisions != null) {
              Files.createDirectories(decisions);
              Path file = decisions.resolve(sections.size() + "-" + policy + ".jsonl");
              try (java.io.BufferedWriter bw = Files.newBufferedWriter(file)) {
                o = VirtualRun.run(w, policy, setup, chat, line -> {
                  try {
                    bw.write(line);
                    bw.newLine();
                  } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                  }
                }, missBreakdown);
              }
            } else {
              o = VirtualRun.run(w, policy, setup, chat, null, missBreakdown);
            }
            PolicyResult r = PolicyResult.summarize(o.data(), ideal);
            results.add(r);
            Map<String, Object> extra = extra(label, policy, o, r);
            extra.put("idealReuseInfinite", round(ideal.tokenShare()));
            extra.put("idealReuseFleetCache", round(bounded.tokenShare()));
            extra.put("fleetCacheBlocks", fleetBlocks);
            if (boundedTiers != bounded) {
              extra.put("idealReuseFleetCacheWithCpu", round(boundedTiers.tokenShare()));
              extra.put("fleetCacheBlocksWithCpu", fleetTierBlocks);
            }
            if (o.missBreakdown() != null) {
              extra.put("missBreakdown", o.missBreakdown());
            }
            extras.add(extra);
            progress.printf(Locale.ROOT,
                "  %-12s TTFT p50 %9.1f ms p99 %9.1f ms  E2E p50 %9.1f ms  cache %5.1f%% (ideal %5.1f%%)  "
                    + "imbalance req %.2f work %s load %s  truth %.1f%%  errors %d  busy %.2f  wall %.1f s%n",
                policy, r.ttftMs().p50(), r.ttftMs().p99(), r.e2eMs().p50(), r.cache().servedShare() * 100,
                r.cache().idealShare() * 100, r.balance().requestImbalance(), r.balance().workImbalance(),
                r.balance().meanLoadImbalance(),
                o.truth().withinShare() * 100, r.counts().failed(),
                java.util.Arrays.stream(o.busyShare()).average().orElse(0), o.wallSeconds());
            if (o.data().sessions() != null) {
              progress.printf(Locale.ROOT, "  %-12s %s%n", "", o.data().sessions().summary());
            }
            if (o.missBreakdown() != null) {
              progress.printf(Locale.ROOT, "  %-12s miss breakdown %s%n", "", o.missBreakdown());
            }
            if (answerIdeal != null) {
              int[] cached = new int[w.size()];
              for (dev.kvrouter.examples.report.RequestRecord q : o.data().requests()) {
                cached[q.index()] = q.ok() ? q.cachedTokens() : -1;
              }
              AnswerReuse served = AnswerReuse.compute(w.requests(), tokens, answers, base.blockSize(),
                  q -> cached[q.index()]);
              extra.put("answerReuse", served);
              progress.printf(Locale.ROOT, "  %-12s answer blocks served on the next turn: %.1f%% (kept by the "
                  + "prompt: %.1f%%)%n", "", served.servedShare() * 100, served.keptShare() * 100);
            }
            writeExtras(extras);
          }
          sections.add(WorkloadResult.of(label, w, ideal, results));
          AbReport partial = new AbReport(AbReport.SCHEMA, Instant.now().toString(), meta, ours, baseline, sections);
          ReportJson.write(partial, out.resolve("report.json"));
          Files.writeString(out.resolve("report.md"), MarkdownReport.render(partial));
        }
      }
    }
    return new AbReport(AbReport.SCHEMA, Instant.now().toString(), meta, ours, baseline, sections);
  }

  private static String describe(AnswerReuse a) {
    return String.format(Locale.ROOT, "%d later turns resend %d decode-filled answer blocks; the next prompt repeats "
            + "%.1f%% of them; first divergence from the answer start min %d / median %d / max %d tokens (%d turns "
            + "repeat the whole computed sequence)", a.turns(), a.answerBlocks(), a.keptShare() * 100,
        a.divergenceMin(), a.divergenceMedian(), a.divergenceMax(), a.noDivergence());
  }

  private static Map<String, Object> extra(String label, String policy, VirtualOutcome o, PolicyResult r) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("workload", label);
    m.put("policy", policy);
    m.put("wallSeconds", round(o.wallSeconds()));
    m.put("simulatedSeconds", round(o.simulatedSeconds()));
    m.put("routerCpuSeconds", round(o.routerCpuNanos() / 1e9));
    m.put("routerCpuMicrosPerRequest", r.counts().sent() == 0 ? 0 : round(o.routerCpuNanos() / 1e3 / r.counts().sent()));
    m.put("indexBytes", o.indexBytes());
    m.put("routerEvictionShare", round(o.evictionShare()));
    m.put("busyShareMean", round(java.util.Arrays.stream(o.busyShare()).average().orElse(0)));
    m.put("busyShareMax", round(java.util.Arrays.stream(o.busyShare()).max().orElse(0)));
    m.put("truth", Map.of("checked", o.truth().checked(), "withinBlock", o.truth().withinBlock(),
        "over", o.truth().over(), "under", o.truth().under(), "withinShare", round(o.truth().withinShare()),
        "predictedTokens", o.truth().predictedTokens(), "actualTokens", o.truth().actualTokens()));
    m.put("ledgerAtEnd", o.ledger());
    m.put("ledgerZero", o.ledger().zero());
    m.put("fallbacks", o.fallbacks());
    m.put("events", o.events());
    m.put("sessions", o.data().sessions());
    // served from cache split by tier: vllm:prefix_cache_hits is the GPU part; cached_tokens adds CPU loads
    double prompt = 0;
    double gpuHit = 0;
    double cached = 0;
    for (dev.kvrouter.examples.report.WorkerCounters c : o.data().counters().values()) {
      prompt += c.promptTokens();
      gpuHit += c.prefixCacheHits();
      cached += c.simPromptTokensCached();
    }
    if (prompt > 0) {
      m.put("servedFromGpuShare", round(gpuHit / prompt));
      m.put("servedFromCpuShare", round((cached - gpuHit) / prompt));
    }
    return m;
  }

  private void writeExtras(List<Map<String, Object>> extras) throws IOException {
    Files.writeString(out.resolve("virtual.json"), new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT)
        .writeValueAsString(extras) + "\n");
  }

  private static double round(double v) {
    return Math.round(v * 10000) / 10000.0;
  }
}
