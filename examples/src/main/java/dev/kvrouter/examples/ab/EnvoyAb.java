package dev.kvrouter.examples.ab;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.kvrouter.examples.loadgen.AbRunner;
import dev.kvrouter.examples.loadgen.LoadConfig;
import dev.kvrouter.examples.loadgen.LoadGenerator;
import dev.kvrouter.examples.loadgen.PolicyPreparer;
import dev.kvrouter.examples.loadgen.RunContext;
import dev.kvrouter.examples.report.CrashWindow;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.report.RoutingOverhead;
import dev.kvrouter.examples.sim.events.EventFaults;
import dev.kvrouter.examples.sim.fleet.MultimodalModels;
import dev.kvrouter.examples.sim.fleet.SimWorker;
import dev.kvrouter.examples.sim.http.FaultControl;
import dev.kvrouter.examples.sim.http.ScriptedOutput;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.examples.workload.AnswerReuse;
import dev.kvrouter.examples.workload.TokenSpace;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.extproc.model.MultimodalSpec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The A/B through real Envoy: starts simulated vLLM workers (HTTP + ZMQ events), the router in its own JVM (the
 * {@code kvrouter} command, with a {@code models:} entry for the real tokenizer) and Envoy (the shipped config,
 * with the trusted policy header let through), then runs every workload once per policy with the load generator
 * ({@link AbRunner}: caches reset between runs; open loop, conversations closed loop). When a workload scripts its
 * answers (multi-turn {@code answers=model}), the workers generate the answer a request's {@code seed} names
 * ({@link ScriptedOutput} over the workload's token space: token ids for {@code format=tokens}; for
 * {@code format=chat} the answer text and the model's tokens of it, its end-of-turn token cut by {@code max_tokens},
 * {@link dev.kvrouter.examples.sim.http.ScriptedChatAnswers}), so later turns resend the model's own answer as in
 * the virtual-time A/B, and envoy.json's {@code answerReuse} says how many of the answers' blocks the next turns
 * kept and were served; other workloads run against the same workers unchanged (a request
 * without {@code seed} keeps its own output). Writes report.json, report.md, charts/ and
 * {@code envoy.json} (the truth check and decision counts per run, from the router's decision records).
 *
 * <p>Images: {@code --multimodal gemma3} (with the model's {@code --tokenizer} and {@code --model}) starts the
 * workers as that model's multimodal workers and gives the router's model entry {@code multimodal: {preset:
 * gemma3}}, for workloads such as {@code image-qa}. The ideal reuse beside every result is the virtual A/B's: the
 * prompts as the workers prefill them ({@link EngineIdeals}), with an infinite cache (report.json) and with the
 * fleet's KV capacity as one LRU cache (envoy.json).
 *
 * <p>Run with the dist module's class path (the router's main class must be on it), see docs/benchmarks/ab.md.
 */
@Command(name = "envoy-ab", mixinStandardHelpOptions = true,
    description = "A/B of routing policies through real Envoy against simulated vLLM workers.")
public final class EnvoyAb implements Callable<Integer> {

  @CommandLine.Spec
  CommandLine.Model.CommandSpec command;

  @Option(names = "--root", defaultValue = "${sys:kvrouter.root:-.}", description = "The checkout (envoy-config/).")
  Path root;

  @Option(names = "--workers", defaultValue = "8")
  int workers;

  @Option(names = "--preset", defaultValue = "qwen3-8b-h100")
  String preset;

  @Option(names = "--model", description = "Served model name (default: the preset's model).")
  String model;

  @Option(names = "--tokenizer", defaultValue = ".cache/tokenizers/qwen3")
  Path tokenizer;

  @Option(names = "--multimodal", paramLabel = "PRESET",
      description = "The served model takes images, expanded as the router's `multimodal: {preset: PRESET}` (e.g. "
          + "gemma3; needs that model's --tokenizer and --model).")
  String multimodal;

  @Option(names = "--block-size", defaultValue = "16")
  int blockSize;

  @Option(names = "--num-gpu-blocks", defaultValue = "0")
  int numGpuBlocks;

  @Option(names = "--kv-offloading-size", defaultValue = "0",
      description = "GiB of vLLM's native CPU offload tier per worker (0: off).")
  double kvOffloadingSizeGib;

  @Option(names = "--workload", required = true, description = "Workload spec, repeatable; a|b|c values sweep.")
  List<String> workloads;

  @Option(names = "--policies", split = ",", defaultValue = "kv_aware,round_robin,least_load,cache_only,random")
  List<String> policies;

  @Option(names = "--ours", defaultValue = "kv_aware")
  String ours;

  @Option(names = "--baseline", defaultValue = "round_robin")
  String baseline;

  @Option(names = "--seed", defaultValue = "1")
  long seed;

  @Option(names = "--warmup", defaultValue = "200",
      description = "Requests of the first workload sent once before measuring (JIT warm-up of a fresh router).")
  int warmup;

  @Option(names = "--warmup-every-policy", description = "Send the warm-up once under each policy in run order "
      + "instead of once under --ours (a short A/B on a small box, where the first policy would pay for the whole "
      + "stack's JIT).")
  boolean warmupEveryPolicy;

  @Option(names = "--max-in-flight", defaultValue = "512")
  int maxInFlight;

  @Option(names = "--max-seconds", defaultValue = "600")
  long maxSeconds;

  @Option(names = "--sample-ms", defaultValue = "250")
  long sampleMs;

  @Option(names = "--routing", defaultValue = "routing: {policy: kv_aware}",
      description = "The router's routing section, one line of YAML; the A/B picks each run's policy per request, so "
          + "this sets the weights kv_aware runs with (e.g. 'routing: {policy: kv_aware, weights: "
          + "{new_prefill_eviction_weight: 0}}').")
  String routing;

  @Option(names = "--router-yaml", defaultValue = "",
      description = "Further sections of the router's kvrouter.yaml, one line of YAML each (e.g. 'load: {scrape: "
          + "{enabled: false}}').")
  List<String> routerYaml;

  @Option(names = "--truth-check-every", defaultValue = "1",
      description = "The router's observability.truth_check_every: 1 (the A/B's truth check reads every response's "
          + "usage) or the product default 16, which leaves 15 streamed responses in 16 after their first chunk.")
  int truthCheckEvery;

  @Option(names = "--event-drop", defaultValue = "0",
      description = "Fault: the share of every worker's KV event batches numbered but never sent, in [0, 1] (the "
          + "router sees a sequence gap, as with a ZMQ high-water-mark drop).")
  double eventDrop;

  @Option(names = "--event-delay-ms", defaultValue = "0",
      description = "Fault: every KV event batch is sent this many milliseconds late, in order.")
  long eventDelayMs;

  @Option(names = "--event-reorder", defaultValue = "0",
      description = "Fault: the share of KV event batches held back and sent after the next one, in [0, 1].")
  double eventReorder;

  @Option(names = "--no-replay",
      description = "The workers open no replay socket (vLLM without a replay endpoint): the router cannot fetch a "
          + "lost batch again, so a gap leaves its view of that worker stale until events.stale_recovery_ms passes "
          + "without a new one (meanwhile credited as far as usage confirms it; --router-yaml "
          + "'events: {stale_view_trust: false}' turns that off).")
  boolean noReplay;

  @Option(names = "--crash-worker", defaultValue = "-1",
      description = "Crash this worker (0-based index) during every measured run and restart it with an empty cache "
          + "(its engine process dies: in-flight requests fail, new ones get 503 until it is back); -1 = off.")
  int crashWorker;

  @Option(names = "--crash-at-s", defaultValue = "20",
      description = "With --crash-worker or --crash-router: seconds into each run.")
  double crashAtSeconds;

  @Option(names = "--crash-down-s", defaultValue = "10",
      description = "With --crash-worker or --crash-router: seconds it stays down.")
  double crashDownSeconds;

  @Option(names = "--crash-router", description = "Kill the router (SIGKILL) --crash-at-s into every measured run "
      + "and start it again --crash-down-s later on the same config: Envoy routes through the pool meanwhile.")
  boolean crashRouter;

  @Option(names = "--crash-process", description = "With --crash-worker: the whole worker process dies (its port "
      + "refuses connections, /metrics included, as a vLLM whose engine died exits) instead of its engine only.")
  boolean crashProcess;

  @Option(names = "--router-replicas", defaultValue = "1",
      description = "Router processes, all listed in the shipped kvrouter_ext_proc cluster (RING_HASH on the request "
          + "id, health-checked); Envoy's xDS comes from the first, --crash-router kills the first.")
  int routerReplicas;

  @Option(names = "--replica-sync", description = "With --router-replicas > 1: the replicas share their reservations "
      + "and predictions (kvrouter.yaml replicas:), else each sees the others' requests only through the workers' "
      + "scraped load.")
  boolean replicaSync;

  @Option(names = "--router-jvm", split = " ", defaultValue = "-Xmx1g -XX:+UseParallelGC",
      description = "The router JVM's options, space-separated; they replace the default (${DEFAULT-VALUE}), so "
          + "repeat it. {dir} stands for each replica's own directory, e.g. "
          + "-XX:StartFlightRecording=filename={dir}/router.jfr,settings=profile for one recording per replica.")
  List<String> routerJvm;

  @Option(names = "--out", defaultValue = "target/ab-envoy")
  Path out;

  public static void main(String[] args) {
    if (System.getProperty("logback.configurationFile") == null) {
      System.setProperty("logback.configurationFile", "sim-logback.xml");
    }
    System.exit(new CommandLine(new EnvoyAb()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    List<String> specs = new ArrayList<>();
    for (String s : workloads) {
      specs.add(AbRunner.withSeed(s, Long.toString(seed)));
    }
    ScriptedOutput scripted = scriptedOutput(specs);
    if (model == null) {
      model = Presets.byId(preset).model().name();
    }
    MultimodalSpec media;
    FaultControl.Update faults;
    EnvoyAbStack.Routers routerSet;
    try {
      routerSet = new EnvoyAbStack.Routers(routerReplicas, replicaSync);
      media = media(multimodal, specs);
      faults = eventFaults(eventDrop, eventDelayMs, eventReorder);
      checkCrash(crashWorker, workers, crashAtSeconds, crashDownSeconds);
      if (crashRouter && crashWorker >= 0) {
        throw new IllegalArgumentException("--crash-router and --crash-worker: one crash per run");
      }
    } catch (IllegalArgumentException e) {
      throw new CommandLine.ParameterException(command.commandLine(), e.getMessage(), e);
    }
    Files.createDirectories(out);
    Path dir = Files.createTempDirectory("kvrouter-envoy-ab");
    EnvoyAbStack.Options o = new EnvoyAbStack.Options(root.toAbsolutePath(), workers, Presets.byId(preset), model,
        tokenizer, blockSize, numGpuBlocks, seed, faults, true, routing, dir, kvOffloadingSizeGib,
        multimodal, String.join(System.lineSeparator(), routerYaml), scripted, truthCheckEvery, !noReplay);
    Map<String, Object> meta = new LinkedHashMap<>();
    meta.put("mode", "through-envoy");
    meta.put("command", "EnvoyAb " + String.join(" ", ProcessHandle.current().info().arguments()
        .map(List::of).orElse(List.of())));
    meta.put("seed", seed);
    meta.put("warmup", warmup);
    meta.put("warmupEveryPolicy", warmupEveryPolicy);
    meta.put("preset", preset);
    // the workers run with vLLM's scheduler defaults for the preset's GPU
    meta.put("maxNumSeqs", Presets.byId(preset).batchLimits().maxNumSeqs());
    meta.put("maxNumBatchedTokens", Presets.byId(preset).batchLimits().maxNumBatchedTokens());
    meta.put("routing", routing);
    meta.put("truthCheckEvery", truthCheckEvery);
    meta.put("kvOffloadingSizeGib", kvOffloadingSizeGib);
    meta.put("tokenizer", tokenizer.toString());
    meta.put("multimodal", multimodal);
    meta.put("eventDrop", eventDrop);
    meta.put("eventDelayMs", eventDelayMs);
    meta.put("eventReorder", eventReorder);
    meta.put("replay", !noReplay);
    meta.put("routerReplicas", routerReplicas);
    meta.put("replicaSync", replicaSync);
    if (crashWorker >= 0) {
      meta.put("crash", Map.of("worker", crashWorker, "atSeconds", crashAtSeconds, "downSeconds", crashDownSeconds,
          "process", crashProcess));
    } else if (crashRouter) {
      meta.put("crash", Map.of("router", true, "atSeconds", crashAtSeconds, "downSeconds", crashDownSeconds));
    }
    meta.put("idealReuse", "the prompts as the workers prefill them (chat: the model's template and tokenizer, media "
        + "keyed by the engine's identifiers), infinite cache");
    meta.put("workerOutput", scripted == null ? "model" : scripted.toString());
    meta.put("cpus", Runtime.getRuntime().availableProcessors());
    meta.put("loadAverageAtStart", java.lang.management.ManagementFactory.getOperatingSystemMXBean()
        .getSystemLoadAverage());
    List<Map<String, Object>> extras = new ArrayList<>();
    try (ChatFront chat = ChatFront.load(model, tokenizer, blockSize, media);
        EnvoyAbStack stack = EnvoyAbStack.start(o, new ProcessRouterLauncher(routerJvm), routerSet)) {
      meta.put("envoy", stack.envoyVersion());
      int gpuBlocks = stack.fleet().config().engineConfig(0).numGpuBlocks();
      meta.put("numGpuBlocks", gpuBlocks);
      EngineIdeals ideals = new EngineIdeals(chat, model, blockSize, (long) gpuBlocks * workers);
      LoadConfig load = LoadConfig.defaults(stack.uri(), model).withMaxInFlight(maxInFlight)
          .withMaxRunTime(Duration.ofSeconds(maxSeconds)).withSampleInterval(Duration.ofMillis(sampleMs));
      String crashed = crashRouter ? CrashWindow.ROUTER
          : crashWorker < 0 ? null : stack.fleet().workers().get(crashWorker).name();
      PolicyPreparer preparer = (policy, w, ctx) -> crash(stack, ctx)
          // two router processes in one run have no one CPU figure
          .routerSnapshot(crashRouter ? null : stack.router()::snapshot)
          .routingOverhead(records -> {
            DecisionRecords d = DecisionRecords.parse(stack.router().decisionRecords());
            RoutingOverhead overhead = d.overhead(records);
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("workload", w.toString());
            m.put("policy", policy);
            m.put("truth", d.truth(records));
            m.put("idealReuseInfinite", Math.round(ideals.infinite(w).tokenShare() * 1e4) / 1e4);
            m.put("idealReuseFleetCache", Math.round(ideals.fleetCache(w).tokenShare() * 1e4) / 1e4);
            m.put("fleetCacheBlocks", ideals.fleetBlocks());
            m.put("decisions", overhead.decisions());
            m.put("fallbacks", overhead.fallbacks());
            DecisionRecords.RouterTtft routerTtft = d.routerTtft(records);
            if (routerTtft != null) {
              m.put("routerTtftMeanMs", Math.round(routerTtft.meanMs() * 1000) / 1000.0);
              m.put("routerTtftP50Ms", Math.round(routerTtft.p50Ms() * 1000) / 1000.0);
              System.out.printf(Locale.ROOT, "  %-12s TTFT mean %.1f ms from the routing decision (its records)%n",
                  policy, routerTtft.meanMs());
            }
            if (w.scriptsAnswers()) {
              // the answer blocks the next turns kept (the template's doing for chat) and were served
              int[] cached = new int[w.size()];
              java.util.Arrays.fill(cached, -1);
              for (RequestRecord r : records) {
                cached[r.index()] = r.ok() ? r.cachedTokens() : -1;
              }
              AnswerReuse a = ideals.answerReuse(w, q -> cached[q.index()]);
              m.put("answerReuse", a);
              System.out.printf(Locale.ROOT, "  %-12s answer blocks served on the next turn: %d of %d (%.1f%%; kept "
                  + "by the next prompt: %.1f%%)%n", policy, a.servedBlocks(), a.answerBlocks(),
                  a.servedShare() * 100, a.keptShare() * 100);
            }
            if (crashed != null) {
              CrashWindow c = CrashWindow.of(crashed, crashAtSeconds, crashDownSeconds, records);
              m.put("crash", c);
              if (crashRouter) {
                System.out.printf(Locale.ROOT, "  %-12s router crash: %d failed (before / while down / after: %d / %d "
                    + "/ %d); requests it did not route %d / %d / %d; served from cache %.1f%% / %.1f%% / %.1f%%; "
                    + "routing again %s after the restart%n",
                    policy, c.failed(), c.before().failed(), c.during().failed(), c.after().failed(),
                    c.before().withoutDecision(), c.during().withoutDecision(), c.after().withoutDecision(),
                    c.before().servedShare() * 100, c.during().servedShare() * 100, c.after().servedShare() * 100,
                    c.firstRoutedAfterSeconds() == null ? "never"
                        : String.format(Locale.ROOT, "%.1f s", c.firstRoutedAfterSeconds()));
              } else {
                System.out.printf(Locale.ROOT, "  %-12s crash of %s: %d failed (%d on it; sent before / while down / "
                    + "after: %d / %d / %d failed), first request it served %s after its restart%n", policy, crashed,
                    c.failed(), c.failedOnCrashed(), c.before().failed(), c.during().failed(), c.after().failed(),
                    c.firstServedAfterSeconds() == null ? "never"
                        : String.format(Locale.ROOT, "%.1f s", c.firstServedAfterSeconds()));
              }
            }
            extras.add(m);
            return overhead;
          }).build();
      AbRunner.Settings settings = new AbRunner.Settings(policies, ours, baseline, true, blockSize, true,
          Duration.ofMillis(1000), Duration.ofSeconds(120), out, meta, warmup, ideals::infinite);
      if (warmupEveryPolicy) {
        settings = settings.warmingEveryPolicy();
      }
      try (LoadGenerator gen = new LoadGenerator(load)) {
        new AbRunner(gen, stack.targets(), settings, preparer, System.out).run(specs);
      }
    } finally {
      Files.writeString(out.resolve("envoy.json"), new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT)
          .writeValueAsString(extras) + "\n");
    }
    return 0;
  }

  /** The run's crash of {@code --crash-worker} or {@code --crash-router}, when asked for. */
  private RunContext.Builder crash(EnvoyAbStack stack, RunContext.Builder ctx) {
    if (crashRouter) {
      long downMillis = Math.round(crashDownSeconds * 1000);
      return ctx.at(Duration.ofNanos(Math.round(crashAtSeconds * 1e9)), "router crash for " + crashDownSeconds + " s",
          () -> {
            // off the driver's timer thread: the kill waits for the process to end, the restart for it to run
            Thread t = new Thread(() -> {
              try {
                stack.killRouter();
                Thread.sleep(downMillis);
                stack.restartRouter();
              } catch (Exception e) {
                System.err.println("the router did not start again: " + e);
              }
            }, "kvrouter-ab-router-restart");
            t.setDaemon(true);
            t.start();
          });
    }
    if (crashWorker < 0) {
      return ctx;
    }
    SimWorker w = stack.fleet().workers().get(crashWorker);
    long downNanos = Math.round(crashDownSeconds * 1e9);
    return ctx.at(Duration.ofNanos(Math.round(crashAtSeconds * 1e9)), (crashProcess ? "process " : "")
        + "crash of " + w.name() + " for " + crashDownSeconds + " s",
        crashProcess ? () -> w.kill(downNanos) : () -> w.engine().crash(downNanos));
  }

  /**
   * The workers' event faults from the command's options, or null when none is asked for (the fleet then starts
   * without fault hooks in the way).
   */
  static FaultControl.Update eventFaults(double drop, long delayMs, double reorder) {
    if (!(drop >= 0 && drop <= 1)) {
      throw new IllegalArgumentException("--event-drop must be in [0, 1], was " + drop);
    }
    if (!(reorder >= 0 && reorder <= 1)) {
      throw new IllegalArgumentException("--event-reorder must be in [0, 1], was " + reorder);
    }
    if (delayMs < 0 || delayMs > EventFaults.MAX_DELAY_MILLIS) {
      throw new IllegalArgumentException("--event-delay-ms must be in [0, " + EventFaults.MAX_DELAY_MILLIS + "], was "
          + delayMs);
    }
    if (drop == 0 && delayMs == 0 && reorder == 0) {
      return null;
    }
    return new FaultControl.Update(drop, delayMs, reorder, null, null, null);
  }

  static void checkCrash(int worker, int workers, double atSeconds, double downSeconds) {
    if (worker < -1 || worker >= workers) {
      throw new IllegalArgumentException("--crash-worker must be -1 (off) or a worker index in [0, " + workers
          + "), was " + worker);
    }
    if (!(atSeconds >= 0) || !(downSeconds >= 0) || Double.isInfinite(atSeconds) || Double.isInfinite(downSeconds)) {
      throw new IllegalArgumentException("--crash-at-s and --crash-down-s must be finite seconds >= 0");
    }
  }

  /**
   * The media expansion of {@code preset} (null: a text model), refusing an unknown preset, and a text model for
   * workloads that send images (the workers would refuse every request).
   */
  static MultimodalSpec media(String preset, List<String> specs) {
    if (preset != null) {
      return MultimodalModels.preset(preset);
    }
    for (String raw : specs) {
      for (String spec : WorkloadCatalog.expand(raw)) {
        if (WorkloadCatalog.create(spec).hasImages()) {
          throw new IllegalArgumentException(spec + " sends images: run it with --multimodal gemma3 --tokenizer "
              + ".cache/tokenizers/gemma3 --preset gemma3-12b-h100 (or gemma3-27b-h100)");
        }
      }
    }
    return null;
  }

  /**
   * The workers' output for these workloads: scripted over the token space of those that script their answers
   * (one space for all of them; a chat request's seed names a chat answer's words in it), else the default.
   */
  static ScriptedOutput scriptedOutput(List<String> specs) {
    TokenSpace space = null;
    for (String raw : specs) {
      for (String spec : WorkloadCatalog.expand(raw)) {
        Workload w = WorkloadCatalog.create(spec);
        if (!w.scriptsAnswers()) {
          continue;
        }
        if (space != null && !space.equals(w.tokenSpace())) {
          throw new IllegalArgumentException("workloads that script their answers must share one token space (the "
              + "workers generate from it), found " + space + " and " + w.tokenSpace());
        }
        space = w.tokenSpace();
      }
    }
    return space == null ? null : new ScriptedOutput(space);
  }
}
