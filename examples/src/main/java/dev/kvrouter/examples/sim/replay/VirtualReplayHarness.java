package dev.kvrouter.examples.sim.replay;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.kvrouter.examples.sim.clock.VirtualClock;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.engine.EngineStats;
import dev.kvrouter.examples.sim.engine.OutputTokens;
import dev.kvrouter.examples.sim.engine.RequestFailure;
import dev.kvrouter.examples.sim.engine.RequestObserver;
import dev.kvrouter.examples.sim.engine.RequestOutcome;
import dev.kvrouter.examples.sim.engine.RequestSpec;
import dev.kvrouter.examples.sim.timing.Preset;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.KvEvent;
import dev.kvrouter.index.wire.WireLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import org.HdrHistogram.Histogram;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Measures the simulator itself: replays a Mooncake trace through N simulated workers in virtual time with a
 * trivial placement (no router), and reports how fast the replay runs in wall time next to what the workers
 * did. The A/B runner uses {@link VirtualFleet} the same way with the real routing code in place of the
 * placement.
 */
@Command(name = "sim-replay", mixinStandardHelpOptions = true,
    description = "Replay a Mooncake trace through simulated workers in virtual time and time the replay.")
public final class VirtualReplayHarness implements Callable<Integer> {

  @Option(names = "--trace", defaultValue = "/work/shared/traces/mooncake_synthetic_trace.jsonl")
  Path trace;

  @Option(names = "--workers", defaultValue = "8")
  int workers;

  @Option(names = "--preset", defaultValue = "llama3.1-8b-h100")
  String preset;

  @Option(names = "--block-size", defaultValue = "16")
  int blockSize;

  @Option(names = "--speed", defaultValue = "1.0", description = "Arrival-time compression (2 = twice the rate).")
  double speed;

  @Option(names = "--placement", defaultValue = "round_robin",
      description = "round_robin | prefix_affinity (worker = first hash id mod N)")
  String placement;

  @Option(names = "--layout", defaultValue = "none",
      description = "Round-trip events through a wire layout: none | vllm_map | vllm_array | sglang_array.")
  String layout;

  @Option(names = "--max-requests", defaultValue = "0", description = "Replay only the first N requests (0 = all).")
  int maxRequests;

  @Option(names = "--repeat", defaultValue = "1", description = "Run the replay this many times (JIT warm-up).")
  int repeat;

  @Option(names = "--out", description = "Write the last run's figures as JSON here.")
  Path out;

  public static void main(String[] args) {
    if (System.getProperty("logback.configurationFile") == null) {
      System.setProperty("logback.configurationFile", "sim-logback.xml");
    }
    System.exit(new CommandLine(new VirtualReplayHarness()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    List<MooncakeTrace.Request> reqs = MooncakeTrace.read(trace);
    if (maxRequests > 0 && maxRequests < reqs.size()) {
      reqs = reqs.subList(0, maxRequests);
    }
    Map<String, Object> result = null;
    for (int r = 0; r < repeat; r++) {
      result = run(reqs);
      System.out.println(new ObjectMapper().writeValueAsString(result));
    }
    if (out != null) {
      Files.createDirectories(out.toAbsolutePath().getParent());
      Files.writeString(out, new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT)
          .writeValueAsString(result) + "\n");
    }
    return 0;
  }

  Map<String, Object> run(List<MooncakeTrace.Request> reqs) {
    return replay(reqs, new Options(trace.getFileName().toString(), workers, Presets.byId(preset), blockSize, speed,
        placement, layout.equals("none") ? null : WireLayout.valueOf(layout.toUpperCase(Locale.ROOT))));
  }

  /**
   * Replay settings.
   *
   * @param name label of the workload in the result
   * @param workers number of simulated workers
   * @param preset model and GPU
   * @param blockSize KV block size
   * @param speed arrival-time compression
   * @param placement {@code round_robin} or {@code prefix_affinity}
   * @param layout wire layout events are round-tripped through, or {@code null}
   */
  public record Options(String name, int workers, Preset preset, int blockSize, double speed, String placement,
      WireLayout layout) {}

  /** Replays {@code reqs} in virtual time and returns the figures (wall time included). */
  public static Map<String, Object> replay(List<MooncakeTrace.Request> reqs, Options o) {
    Preset p = o.preset();
    int workers = o.workers();
    int blockSize = o.blockSize();
    double speed = o.speed();
    String placement = o.placement();
    VirtualClock clock = new VirtualClock(1.7e9);
    List<String> names = new ArrayList<>();
    List<EngineConfig> configs = new ArrayList<>();
    for (int i = 0; i < workers; i++) {
      names.add("sim-" + i);
      configs.add(EngineConfig.fromPreset(p, blockSize).seed(1000 + i).build());
    }
    long[] eventBatches = new long[1];
    long[] storedBlocks = new long[1];
    WireLayout wl = o.layout();
    VirtualFleet fleet = new VirtualFleet(clock, names, configs, p.timingModel(), OutputTokens.range(1000, 1000),
        wl, 0, (w, b) -> {
          eventBatches[0]++;
          for (KvEvent e : b.batch().events()) {
            if (e instanceof BlockStored s) {
              storedBlocks[0] += s.blockHashes().length;
            }
          }
        }, 7);
    Histogram ttft = new Histogram(3_600_000_000L, 3);
    Histogram e2e = new Histogram(3_600_000_000L, 3);
    long[] done = new long[3]; // finished, failed, cached tokens
    int vocab = p.model().vocab();
    int n = 0;
    for (MooncakeTrace.Request r : reqs) {
      int id = n++;
      int worker = placement.equals("prefix_affinity") && r.hashIds().length > 0
          ? Math.floorMod(r.hashIds()[0], workers) : id % workers;
      long at = (long) (r.timestampMillis() * 1_000_000L / speed);
      clock.schedule(at, () -> fleet.submit(worker, new RequestSpec("r" + id, r.promptTokens(vocab, id),
          Math.max(1, r.outputLength()), null, null, id), new RequestObserver() {
            @Override
            public void onToken(int tokenId, int index, long atNanos, int cachedTokens, boolean last) {}

            @Override
            public void onFinished(RequestOutcome o) {
              done[0]++;
              done[2] += o.cachedTokens();
              ttft.recordValue(Math.max(1, o.ttftNanos() / 1000));
              e2e.recordValue(Math.max(1, (o.finishNanos() - o.arrivalNanos()) / 1000));
            }

            @Override
            public void onFailed(RequestFailure f) {
              done[1]++;
            }
          }));
    }
    long t0 = System.nanoTime();
    long tasks = clock.runUntilIdle(1_000_000_000L);
    double wall = (System.nanoTime() - t0) / 1e9;

    List<EngineStats> stats = fleet.stats();
    long prompt = 0;
    long cached = 0;
    long computed = 0;
    long maxPrompt = 0;
    long preempt = 0;
    long evicted = 0;
    for (EngineStats s : stats) {
      prompt += s.promptTokens();
      cached += s.cachedPromptTokens();
      computed += s.prefillTokensComputed();
      maxPrompt = Math.max(maxPrompt, s.promptTokens());
      preempt += s.preemptions();
      evicted += s.evictions();
    }
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("trace", o.name());
    m.put("requests", reqs.size());
    m.put("workers", workers);
    m.put("preset", p.id());
    m.put("num_gpu_blocks", configs.get(0).numGpuBlocks());
    m.put("block_size", blockSize);
    m.put("speed", speed);
    m.put("placement", placement);
    m.put("layout", wl == null ? "none" : wl.name().toLowerCase(Locale.ROOT));
    m.put("wall_seconds", round(wall));
    m.put("simulated_seconds", round(clock.nanoTime() / 1e9));
    m.put("requests_per_wall_second", round(reqs.size() / wall));
    m.put("clock_tasks", tasks);
    m.put("finished", done[0]);
    m.put("failed", done[1]);
    m.put("prompt_tokens", prompt);
    m.put("cached_prompt_tokens", cached);
    m.put("prefill_tokens_computed", computed);
    m.put("cache_hit_rate", prompt == 0 ? 0 : round((double) cached / prompt));
    m.put("ideal_reuse", round(idealReuse(reqs)));
    m.put("prompt_imbalance_max_over_mean", prompt == 0 ? 0 : round((double) maxPrompt * workers / prompt));
    m.put("preemptions", preempt);
    m.put("evicted_blocks", evicted);
    m.put("event_batches", eventBatches[0]);
    m.put("stored_blocks", storedBlocks[0]);
    m.put("ttft_ms_p50", round(ttft.getValueAtPercentile(50) / 1000.0));
    m.put("ttft_ms_p90", round(ttft.getValueAtPercentile(90) / 1000.0));
    m.put("ttft_ms_p99", round(ttft.getValueAtPercentile(99) / 1000.0));
    m.put("e2e_ms_p50", round(e2e.getValueAtPercentile(50) / 1000.0));
    return m;
  }

  /** Share of prompt blocks (512-token hash ids) already seen earlier in the trace, position-wise. */
  static double idealReuse(List<MooncakeTrace.Request> reqs) {
    Set<Long> seen = new HashSet<>();
    long total = 0;
    long reused = 0;
    for (MooncakeTrace.Request r : reqs) {
      long parent = 17;
      for (int h : r.hashIds()) {
        parent = parent * 1_000_003L + h; // the prefix up to this block, not just the id
        total++;
        if (!seen.add(parent)) {
          reused++;
        }
      }
    }
    return total == 0 ? 0 : (double) reused / total;
  }

  private static double round(double v) {
    return Math.round(v * 1000) / 1000.0;
  }
}
