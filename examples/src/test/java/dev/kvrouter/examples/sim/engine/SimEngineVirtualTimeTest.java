package dev.kvrouter.examples.sim.engine;

import static dev.kvrouter.examples.sim.testing.Tokens.concat;
import static dev.kvrouter.examples.sim.testing.Tokens.seq;
import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.sim.clock.SimClock;
import dev.kvrouter.examples.sim.clock.VirtualClock;
import dev.kvrouter.examples.sim.events.InProcessKvEventSink;
import dev.kvrouter.index.wire.AllBlocksCleared;
import dev.kvrouter.index.wire.BlockRemoved;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.KvEvent;
import dev.kvrouter.examples.sim.events.SequencedKvEventBatch;
import dev.kvrouter.examples.sim.testing.RecordingObserver;
import dev.kvrouter.examples.sim.testing.RecordingSink;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.examples.sim.timing.RooflineTimingModel;
import dev.kvrouter.examples.sim.timing.StepWork;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The clock-driven engine in virtual time: timing, determinism, crash and restart, slowdown. */
class SimEngineVirtualTimeTest {

  private static final long MAX_TASKS = 5_000_000;
  private final RooflineTimingModel timing = Presets.LLAMA_3_1_8B_H100.timingModel();

  private static EngineConfig config(long seed) {
    return EngineConfig.builder("m").blockSize(16).numGpuBlocks(2000).maxNumSeqs(64).maxNumBatchedTokens(2048)
        .maxModelLen(8192).seed(seed).build();
  }

  @Test
  void ttftOfALoneRequestIsTheTimingModelsPrefillStep() {
    VirtualClock clock = new VirtualClock();
    SimEngine engine = new SimEngine("w", config(1), clock, timing, new RecordingSink(), OutputTokens.range(1, 9));
    RecordingObserver o = new RecordingObserver();
    clock.schedule(5_000_000, () -> engine.submitNow(RequestSpec.of("a", seq(1000, 1), 3), o));
    clock.runUntilIdle(MAX_TASKS);
    long prefill = timing.stepNanos(new StepWork.Builder().add(0, 1000, 1000, true).build());
    long decode1 = timing.stepNanos(new StepWork.Builder().add(1000, 1, 1000, true).build());
    assertThat(o.outcome.ttftNanos()).isEqualTo(prefill);
    assertThat(o.tokenTimes).containsExactly(5_000_000 + prefill, 5_000_000 + prefill + decode1,
        5_000_000 + prefill + decode1 + timing.stepNanos(new StepWork.Builder().add(1001, 1, 1000, true).build()));
  }

  @Test
  void firstTokensAppliedLateByALoadedHostAreCountedApartFromTheModelsTtft() {
    // A clock whose thread runs every task 2 ms after it was due, as a loaded host's does: the TTFT histogram keeps
    // the model's time, and the lateness of each first token is summed beside it.
    VirtualClock virtual = new VirtualClock();
    SimClock late = new SimClock() {
      @Override
      public long nanoTime() {
        return virtual.nanoTime() + 2_000_000;
      }

      @Override
      public double epochSeconds() {
        return virtual.epochSeconds();
      }

      @Override
      public void execute(Runnable task) {
        virtual.execute(task);
      }

      @Override
      public Cancellable schedule(long atNanos, Runnable task) {
        return virtual.schedule(atNanos, task); // due at atNanos of this clock, run 2 ms after it by this clock
      }
    };
    SimEngine engine = new SimEngine("w", config(1), late, timing, new RecordingSink(), OutputTokens.range(1, 9));
    RecordingObserver a = new RecordingObserver();
    RecordingObserver b = new RecordingObserver();
    engine.submitNow(RequestSpec.of("a", seq(1000, 1), 3), a);
    engine.submitNow(RequestSpec.of("b", seq(500, 5000), 3), b);
    virtual.runUntilIdle(MAX_TASKS);
    // a alone is prefilled in the first step (b arrives while it runs): the model's time, whatever the lateness
    assertThat(a.outcome.ttftNanos()).isEqualTo(timing.stepNanos(new StepWork.Builder().add(0, 1000, 1000, true)
        .build()));
    EngineStats s = engine.statsNow();
    assertThat(s.ttft().count()).isEqualTo(2);
    assertThat(s.firstTokenLateNanos()).isEqualTo(2 * 2_000_000L);
    // on time, nothing
    VirtualClock onTime = new VirtualClock();
    SimEngine punctual = new SimEngine("w", config(1), onTime, timing, new RecordingSink(), OutputTokens.range(1, 9));
    punctual.submitNow(RequestSpec.of("a", seq(1000, 1), 3), new RecordingObserver());
    onTime.runUntilIdle(MAX_TASKS);
    assertThat(punctual.statsNow().firstTokenLateNanos()).isZero();
  }

  @Test
  void aCacheHitCutsTtft() {
    VirtualClock clock = new VirtualClock();
    SimEngine engine = new SimEngine("w", config(1), clock, timing, new RecordingSink(), OutputTokens.range(1, 9));
    int[] doc = seq(4000, 1);
    RecordingObserver first = new RecordingObserver();
    RecordingObserver second = new RecordingObserver();
    engine.submitNow(RequestSpec.of("a", concat(doc, seq(20, 90000)), 1), first);
    clock.runUntilIdle(MAX_TASKS);
    engine.submitNow(RequestSpec.of("b", concat(doc, seq(20, 80000)), 1), second);
    clock.runUntilIdle(MAX_TASKS);
    assertThat(second.outcome.cachedTokens()).isEqualTo(4000);
    assertThat(second.outcome.ttftNanos()).isLessThan(first.outcome.ttftNanos() / 5);
  }

  /** A seeded open-loop workload with shared system prompts; returns a full trace of what happened. */
  private static String run(long engineSeed, long workloadSeed) {
    VirtualClock clock = new VirtualClock(1.7e9);
    List<String> trace = new ArrayList<>();
    InProcessKvEventSink sink = new InProcessKvEventSink(clock, 3,
        b -> trace.add("ev " + b.seq() + " " + b.batch().ts() + " " + b.batch().events()));
    SimEngine engine = new SimEngine("w", config(engineSeed).toBuilder().numGpuBlocks(700).build(), clock,
        Presets.LLAMA_3_1_8B_H100.timingModel(), sink, OutputTokens.range(1, 1000));
    SplittableRandom rnd = new SplittableRandom(workloadSeed);
    int[][] system = {seq(300, 1), seq(520, 5000), seq(64, 9000), seq(1200, 20000)};
    Map<String, RecordingObserver> obs = new LinkedHashMap<>();
    long t = 0;
    for (int i = 0; i < 300; i++) {
      t += (long) (-Math.log(1 - rnd.nextDouble()) * 40_000_000); // Poisson, 25 req/s
      int[] prompt = concat(system[rnd.nextInt(system.length)], seq(1 + rnd.nextInt(200), 100_000 + i * 300));
      RequestSpec spec = new RequestSpec("r" + i, prompt, 1 + rnd.nextInt(40), null, null, i);
      RecordingObserver o = new RecordingObserver();
      obs.put(spec.id(), o);
      clock.schedule(t, () -> engine.submitNow(spec, o));
    }
    clock.runUntilIdle(MAX_TASKS);
    for (var e : obs.entrySet()) {
      RecordingObserver o = e.getValue();
      assertThat(o.outcome).as(e.getKey()).isNotNull();
      trace.add(e.getKey() + " " + o.tokens + " " + o.tokenTimes + " cached=" + o.outcome.cachedTokens()
          + " pre=" + o.outcome.preemptions());
    }
    EngineStats s = engine.statsNow();
    trace.add("stats " + s.steps() + " " + s.busyNanos() + " " + s.preemptions() + " " + s.evictions() + " "
        + s.cachedPromptTokens() + " " + s.prefillTokensComputed());
    return String.join("\n", trace);
  }

  @Test
  void sameSeedsGiveIdenticalRuns() {
    String a = run(42, 7);
    String b = run(42, 7);
    assertThat(a).isEqualTo(b);
    assertThat(a).contains("BlockRemoved"); // the workload is big enough to evict
  }

  @Test
  void theEngineSeedChangesOnlyTheEngineHashes() {
    String a = run(42, 7);
    String b = run(43, 7);
    assertThat(b).isNotEqualTo(a);
    List<String> requestsA = Arrays.stream(a.split("\n")).filter(l -> !l.startsWith("ev ")).toList();
    List<String> requestsB = Arrays.stream(b.split("\n")).filter(l -> !l.startsWith("ev ")).toList();
    assertThat(requestsB).isEqualTo(requestsA);
  }

  @Test
  void crashFailsInFlightRequestsAndRestartComesBackEmptyWithANewPublisherLifetime() {
    VirtualClock clock = new VirtualClock();
    RecordingSink sink = new RecordingSink();
    SimEngine engine = new SimEngine("w", config(9), clock, timing, sink, OutputTokens.range(1, 9));
    int[] prompt = seq(3000, 1);
    RecordingObserver warm = new RecordingObserver();
    engine.submitNow(RequestSpec.of("warm", prompt, 1), warm);
    clock.runUntilIdle(MAX_TASKS);
    List<BlockStored> before = sink.events(BlockStored.class);

    RecordingObserver inFlight = new RecordingObserver();
    engine.submitNow(RequestSpec.of("long", seq(2000, 50_000), 500), inFlight);
    clock.runUntil(clock.nanoTime() + 300_000_000, MAX_TASKS);
    assertThat(inFlight.tokens).isNotEmpty();
    engine.crashNow(1_000_000_000);
    assertThat(inFlight.failure.kind()).isEqualTo(RequestFailure.Kind.ENGINE_DEAD);
    assertThat(engine.isUp()).isFalse();

    RecordingObserver whileDown = new RecordingObserver();
    engine.submitNow(RequestSpec.of("down", prompt, 1), whileDown);
    assertThat(whileDown.failure.kind()).isEqualTo(RequestFailure.Kind.UNAVAILABLE);
    int batchesBeforeRestart = sink.batches.size();
    clock.runUntil(clock.nanoTime() + 999_000_000, MAX_TASKS);
    assertThat(engine.isUp()).isFalse();
    clock.runUntil(clock.nanoTime() + 2_000_000, MAX_TASKS);
    assertThat(engine.isUp()).isTrue();
    assertThat(sink.lifecycle).containsExactly("crashed", "restart");
    assertThat(sink.batches.get(batchesBeforeRestart).events()).containsExactly(AllBlocksCleared.INSTANCE);

    RecordingObserver after = new RecordingObserver();
    engine.submitNow(RequestSpec.of("after", prompt, 1), after);
    clock.runUntilIdle(MAX_TASKS);
    assertThat(after.outcome.cachedTokens()).isZero();
    BlockStored firstAfter = sink.batches.subList(batchesBeforeRestart, sink.batches.size()).stream()
        .flatMap(b -> b.events().stream()).filter(e -> e instanceof BlockStored)
        .map(e -> (BlockStored) e).findFirst().orElseThrow();
    // same tokens, new process: a new engine-hash seed
    assertThat(firstAfter.tokenIds()).startsWith(Arrays.copyOf(before.get(0).tokenIds(), 16));
    assertThat(firstAfter.blockHashes()[0]).isNotEqualTo(before.get(0).blockHashes()[0]);
    assertThat(engine.statsNow().restarts()).isEqualTo(1);
  }

  @Test
  void slowdownStretchesSteps() {
    VirtualClock clock = new VirtualClock();
    SimEngine engine = new SimEngine("w", config(1), clock, timing, new RecordingSink(), OutputTokens.range(1, 9));
    RecordingObserver nominal = new RecordingObserver();
    engine.submitNow(RequestSpec.of("a", seq(1500, 1), 1), nominal);
    clock.runUntilIdle(MAX_TASKS);
    engine.setSlowdown(2.5);
    clock.runUntilIdle(MAX_TASKS);
    RecordingObserver slow = new RecordingObserver();
    engine.submitNow(RequestSpec.of("b", seq(1500, 70_000), 1), slow);
    clock.runUntilIdle(MAX_TASKS);
    assertThat((double) slow.outcome.ttftNanos()).isCloseTo(2.5 * nominal.outcome.ttftNanos(),
        org.assertj.core.data.Offset.offset(2.0));
  }

  @Test
  void eventsArePublishedOncePerStepAfterTheStepEnds() {
    VirtualClock clock = new VirtualClock();
    List<SequencedKvEventBatch> got = new ArrayList<>();
    List<Long> at = new ArrayList<>();
    InProcessKvEventSink sink = new InProcessKvEventSink(clock, 1, b -> {
      got.add(b);
      at.add(clock.nanoTime());
    });
    SimEngine engine = new SimEngine("w", config(1), clock, timing, sink, OutputTokens.range(1, 9));
    RecordingObserver o = new RecordingObserver();
    engine.submitNow(RequestSpec.of("a", seq(5000, 1), 2), o); // 3 chunks of 2048
    clock.runUntilIdle(MAX_TASKS);
    assertThat(got).extracting(SequencedKvEventBatch::seq).containsExactly(0L, 1L, 2L);
    assertThat(at.get(2)).isEqualTo(o.tokenTimes.get(0)); // the last chunk's blocks are announced at its end
    int stored = got.stream().flatMap(b -> b.batch().events().stream())
        .mapToInt(e -> ((BlockStored) e).blockHashes().length).sum();
    assertThat(stored).isEqualTo(5000 / 16);
  }
}
