package dev.kvrouter.bench.routing;

import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.Reservation;
import dev.kvrouter.extproc.load.WorkerLoad;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.routing.Candidate;
import dev.kvrouter.extproc.routing.CostModel;
import dev.kvrouter.extproc.routing.KvAwarePolicy;
import dev.kvrouter.extproc.routing.Overlap;
import dev.kvrouter.extproc.routing.PromptInfo;
import dev.kvrouter.extproc.routing.RequestShape;
import dev.kvrouter.extproc.routing.RouteRequest;
import dev.kvrouter.extproc.routing.Scoring;
import dev.kvrouter.extproc.routing.Weights;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.xds.registry.Worker;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The parts of a decision that scale with the fleet or the prompt, in isolation: {@code score} runs the cost
 * model over N ready candidates (overlaps and load snapshots in hand) and the kv_aware choice;
 * {@code scoreTiedFleet} the same on an idle fleet and a prompt nobody holds, where every candidate ties and the
 * tie-breaks decide (the worker given a request least recently, then the prompt-keyed hash);
 * {@code ledgerReserveRelease} is one 128-block reservation (shared-prefix reference counts) and its two
 * releases. Same prompt and fleet shapes as {@link RoutingBench}.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(1)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class ScoringBench {

  static final int BLOCK = 16;
  static final int PROMPT_BLOCKS = 128;
  private static final KvAwarePolicy KV_AWARE = new KvAwarePolicy();

  @Param({"8", "64"})
  public int workers;

  List<Candidate> candidates;
  List<Candidate> idle;
  RequestShape shape;
  Scoring scoring;
  Scoring idleScoring;
  LoadLedger ledger;
  long[] hashes;

  @Setup
  public void setup() {
    SplittableRandom rnd = new SplittableRandom(42);
    candidates = new ArrayList<>();
    for (int w = 0; w < workers; w++) {
      Worker worker = new Worker("w" + w, "10.0.0." + (w + 1), 8000, "m", List.of(), Worker.Role.BOTH, null, 1,
          BLOCK, 1, null, false, Map.of());
      int gpu = rnd.nextInt(PROMPT_BLOCKS);
      Overlap o = new Overlap(gpu, rnd.nextInt(PROMPT_BLOCKS - gpu + 1) / 2, 0, rnd.nextInt(8), w % 16 == 15);
      int prefill = rnd.nextInt(8192);
      int decode = rnd.nextInt(2000);
      // the same draws as before the context term, so earlier results stay comparable; context = 2 x memory
      WorkerLoad load = new WorkerLoad(prefill, decode, 2L * decode, rnd.nextInt(16), -1, Double.NaN, false);
      candidates.add(Candidate.of(worker, 0, o, load, rnd.nextInt(8)));
    }
    shape = RequestShape.of(PROMPT_BLOCKS * BLOCK, BLOCK, PROMPT_BLOCKS, 256);
    hashes = new long[PROMPT_BLOCKS];
    for (int i = 0; i < PROMPT_BLOCKS; i++) {
      hashes[i] = 0x9E3779B97F4A7C15L * (i + 1);
    }
    // the request as the router passes it, its prompt's block hashes with it
    RouteRequest request = new RouteRequest("bench", new InferenceRequest(InferenceRequest.Kind.COMPLETIONS, "m",
        false, null, 256), null, null, null, new PromptInfo(PROMPT_BLOCKS * BLOCK, BLOCK, hashes), null, 0, null);
    scoring = new Scoring(request, candidates, Weights.DEFAULTS, shape, true, new SplittableRandom(7));
    idle = new ArrayList<>();
    for (Candidate c : candidates) {
      idle.add(Candidate.of(c.worker(), 0, Overlap.NONE, WorkerLoad.ZERO, 0));
    }
    idleScoring = new Scoring(request, idle, Weights.DEFAULTS, shape, true, new SplittableRandom(7));
    ledger = new LoadLedger(System::nanoTime, TimeUnit.MINUTES.toNanos(30), 1_000_000);
    // another request already holds the first half of the prompt on w0
    long[] half = new long[PROMPT_BLOCKS / 2];
    System.arraycopy(hashes, 0, half, 0, half.length);
    ledger.reserve(WorkerId.of("w0"), 100, half, 4);
  }

  @Benchmark
  public Candidate score() {
    CostModel.score(candidates, Weights.DEFAULTS, shape, 0);
    return KV_AWARE.choose(scoring).candidate();
  }

  @Benchmark
  public Candidate scoreTiedFleet() {
    CostModel.score(idle, Weights.DEFAULTS, shape, 0);
    return KV_AWARE.choose(idleScoring).candidate();
  }

  @Benchmark
  public int ledgerReserveRelease() {
    Reservation r = ledger.reserve(WorkerId.of("w0"), 512, hashes, 16);
    ledger.prefillDone(r);
    ledger.release(r);
    return r.blocks();
  }
}
