package dev.kvrouter.bench.sim;

import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.engine.EngineCore;
import dev.kvrouter.examples.sim.engine.OutputTokens;
import dev.kvrouter.examples.sim.engine.RequestFailure;
import dev.kvrouter.examples.sim.engine.RequestObserver;
import dev.kvrouter.examples.sim.engine.RequestOutcome;
import dev.kvrouter.examples.sim.engine.RequestSpec;
import dev.kvrouter.examples.sim.engine.ScheduledStep;
import dev.kvrouter.examples.sim.replay.MooncakeTrace;
import dev.kvrouter.examples.sim.replay.VirtualReplayHarness;
import dev.kvrouter.examples.sim.timing.Presets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * How fast the simulated vLLM engine runs in virtual time: the cost the A/B runner pays per simulated request
 * and per engine step. Workloads are synthetic Mooncake-format traces (no file needed): prompts of 2k-16k tokens
 * built from a Zipf-popular pool of 512-token blocks, so prefixes are shared and the cache evicts.
 *
 * <p>Run: {@code java -jar bench/target/benchmarks.jar SimEngineBenchmark -f 1 -wi 3 -i 5}
 */
@Fork(1)
@Warmup(iterations = 3)
@Measurement(iterations = 5)
public class SimEngineBenchmark {

  /** A synthetic trace: {@code n} requests, Poisson arrivals at {@code rate}/s, prefixes from a shared pool. */
  static List<MooncakeTrace.Request> syntheticTrace(int n, double rate, long seed) {
    SplittableRandom r = new SplittableRandom(seed);
    List<MooncakeTrace.Request> out = new ArrayList<>(n);
    double t = 0;
    int nextUnique = 1_000_000;
    for (int i = 0; i < n; i++) {
      t += -Math.log(1 - r.nextDouble()) / rate;
      int blocks = 4 + r.nextInt(28);
      int shared = (int) (blocks * r.nextDouble() * 0.8);
      int doc = (int) Math.floor(Math.pow(r.nextDouble(), 2.5) * 64); // Zipf-like popularity over 64 documents
      int[] ids = new int[blocks];
      for (int b = 0; b < blocks; b++) {
        ids[b] = b < shared ? doc * 100 + b : nextUnique++;
      }
      int len = blocks * 512 - r.nextInt(512);
      out.add(new MooncakeTrace.Request((long) (t * 1000), len, 20 + r.nextInt(200), ids));
    }
    return out;
  }

  /** A whole replay of 1,000 requests on 8 workers; divide 1,000 by the time per op for requests/s. */
  @State(Scope.Benchmark)
  @BenchmarkMode(Mode.AverageTime)
  @OutputTimeUnit(TimeUnit.MILLISECONDS)
  public static class Replay {
    @Param({"round_robin", "prefix_affinity"})
    public String placement;

    List<MooncakeTrace.Request> trace;

    @Setup(Level.Trial)
    public void setup() {
      trace = syntheticTrace(1000, 4.0, 42);
    }

    @Benchmark
    public Object replay1000Requests() {
      Map<String, Object> m = VirtualReplayHarness.replay(trace, new VirtualReplayHarness.Options("synthetic", 8,
          Presets.LLAMA_3_1_8B_H100, 16, 1.0, placement, null));
      return m.get("finished");
    }
  }

  /**
   * One engine step (schedule + complete) in a steady state: 128 requests of 2,000-token prompts generating 200
   * tokens each; a finished request is replaced at once by one with the same prompt (a cache hit), so a step is
   * mostly decodes plus the occasional short prefill, as in a busy worker.
   */
  @State(Scope.Benchmark)
  @BenchmarkMode(Mode.AverageTime)
  @OutputTimeUnit(TimeUnit.MICROSECONDS)
  public static class SteadyStep {
    EngineCore core;
    long now;
    long next;
    int[][] prompts;

    @Setup(Level.Iteration)
    public void setup() {
      core = EngineCore.create(EngineConfig.fromPreset(Presets.LLAMA_3_1_8B_H100, 16).maxNumSeqs(256).build(), 1,
          OutputTokens.range(1000, 1000));
      prompts = new int[128][];
      for (int i = 0; i < 128; i++) {
        prompts[i] = new int[2000];
        for (int k = 0; k < 2000; k++) {
          prompts[i][k] = 1000 + (i * 7919 + k) % 100_000;
        }
        submit(i);
      }
      for (int s = 0; s < 200; s++) {
        step();
      }
    }

    private void submit(int slot) {
      core.add(new RequestSpec("r" + (next++), prompts[slot], 200, null, null, slot), new RequestObserver() {
        @Override
        public void onToken(int tokenId, int index, long atNanos, int cachedTokens, boolean last) {}

        @Override
        public void onFinished(RequestOutcome outcome) {
          submit(slot);
        }

        @Override
        public void onFailed(RequestFailure failure) {
          throw new IllegalStateException(failure.message());
        }
      }, now);
    }

    @Benchmark
    public long step() {
      ScheduledStep s = core.schedule();
      now += 1_000_000;
      core.complete(s, 1_000_000, now);
      core.takeEvents();
      return s.totalTokens();
    }
  }
}
