package dev.kvrouter.examples.sim.events;

import static dev.kvrouter.examples.sim.testing.Tokens.seq;
import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.sim.clock.VirtualClock;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.engine.OutputTokens;
import dev.kvrouter.examples.sim.engine.RequestSpec;
import dev.kvrouter.examples.sim.engine.SimEngine;
import dev.kvrouter.examples.sim.testing.RecordingObserver;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.extproc.load.WorkerLoad;
import dev.kvrouter.extproc.routing.Candidate;
import dev.kvrouter.extproc.routing.CostModel;
import dev.kvrouter.extproc.routing.KvIndexOverlapSource;
import dev.kvrouter.extproc.routing.Overlap;
import dev.kvrouter.extproc.routing.RequestShape;
import dev.kvrouter.extproc.routing.Weights;
import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import dev.kvrouter.index.events.EventCounter;
import dev.kvrouter.index.events.EventPlaneHealth;
import dev.kvrouter.index.events.EventSource;
import dev.kvrouter.index.events.InProcessEventFollower;
import dev.kvrouter.index.wire.EventEncoder;
import dev.kvrouter.index.wire.WireLayout;
import dev.kvrouter.xds.registry.Worker;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import org.junit.jupiter.api.Test;

/**
 * The simulated engine's CPU-tier events through the router's real event path (vLLM map layout, decoder, sequence
 * follower, applier) into the {@link KvIndex}: a block offloaded to CPU and evicted from GPU shows as CPU overlap
 * after the GPU run, and the cost model credits it with {@code cpu_credit}.
 */
class OffloadEventsIndexTest {

  private static final String MODEL = "m";
  private static final int BS = 16;

  @Test
  void cpuTierEventsBecomeCpuOverlapAfterTheGpuRun() {
    VirtualClock clock = new VirtualClock(1.7e9);
    Clock wall = Clock.fixed(Instant.ofEpochSecond(1_700_000_000L), ZoneOffset.UTC);
    KvIndex index = new KvIndex(IndexConfig.defaults(), wall);
    EventPlaneHealth health = new EventPlaneHealth(new SimpleMeterRegistry(), wall, Duration.ofSeconds(60));
    WorkerId id = new WorkerId("w", 0);
    InProcessEventFollower follower = new InProcessEventFollower(index, health,
        EventSource.connect(id, MODEL, BS, "inproc://w", null), null, wall);
    EventEncoder encoder = new EventEncoder(WireLayout.VLLM_MAP);
    InProcessKvEventSink sink = new InProcessKvEventSink(clock, 1, b -> follower.onLive(b.seq(),
        encoder.encode(b.batch())));
    // 5 usable GPU blocks, 16 CPU blocks
    EngineConfig c = EngineConfig.builder(MODEL).blockSize(BS).numGpuBlocks(6).maxModelLen(256)
        .maxNumBatchedTokens(256).seed(3).numCpuBlocks(16).build();
    SimEngine engine = new SimEngine("w", c, clock, Presets.DEFAULT.timingModel(), sink, OutputTokens.range(1, 9));

    int[] a = seq(48, 1); // 3 blocks
    int[] b = seq(48, 5000); // 3 blocks: evicts a's last block from GPU (5 usable: a0 a1 stay)
    submit(engine, clock, "a", a);
    submit(engine, clock, "b", b);

    long[] hashes = BlockHasher.hashFullBlocks(CacheNamespace.of(MODEL).rootSeed(), a, a.length, BS);
    Overlap o = new KvIndexOverlapSource(index).lookup(hashes).overlap(id);
    assertThat(o.gpu()).isEqualTo(2);
    assertThat(o.cpu()).isEqualTo(1);
    assertThat(o.stale()).isFalse();
    assertThat(follower.health().count(EventCounter.SKIPPED_UNKNOWN_BLOCK)).isZero();

    // the router's credit: 2 GPU blocks at gpu_credit 1 plus 1 CPU block at cpu_credit 0.75
    Weights w = Weights.DEFAULTS;
    Worker worker = new Worker("w", "127.0.0.1", 8000, MODEL, java.util.List.of(), Worker.Role.BOTH, null, 1, BS, 1,
        null, false, java.util.Map.of());
    Candidate cand = Candidate.of(worker, 0, o, WorkerLoad.ZERO, 0);
    CostModel.score(java.util.List.of(cand), w, RequestShape.of(a.length + 16, BS, 4, 1), 0);
    assertThat(cand.creditBlocks()).isEqualTo(2 * w.gpuCredit() + w.cpuCredit());
  }

  private static void submit(SimEngine e, VirtualClock clock, String id, int[] prompt) {
    RecordingObserver o = new RecordingObserver();
    clock.schedule(clock.nanoTime() + 1_000_000, () -> e.submitNow(RequestSpec.of(id, prompt, 1), o));
    clock.runUntilIdle(100_000);
    assertThat(o.outcome).isNotNull();
  }
}
