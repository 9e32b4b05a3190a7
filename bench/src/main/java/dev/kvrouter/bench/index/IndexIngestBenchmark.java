package dev.kvrouter.bench.index;

import dev.kvrouter.index.events.EventApplier;
import dev.kvrouter.index.wire.WireLayout;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Event ingestion on one core: msgpack payload to index, the whole per-worker event path minus the socket
 * (decode, BlockHasher over the block's tokens, handle map, shared table). One op = one block event (a
 * block stored or removed), so the score reads as block events per second.
 *
 * <p>Steady state: each batch is a vLLM 0.26 map-layout batch of 4 BlockStored events of 4 blocks of 16
 * tokens (a chain) plus 16 BlockRemoved of blocks stored 512 batches before; the worker holds about 8k
 * blocks, the index about 8k x {@code otherWorkers + 1}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"-Xms2g", "-Xmx2g"})
public class IndexIngestBenchmark {

  private static final int CYCLE = IngestFixture.CYCLE;
  private static final int BLOCK_EVENTS = 32;

  @Param({"VLLM_MAP", "VLLM_ARRAY"})
  public WireLayout layout;

  /** Other workers' blocks in the shared table (table size, not this worker's). */
  @Param({"0", "63"})
  public int otherWorkers;

  private IngestFixture fixture;
  private EventStream stream;
  private EventApplier applier;
  private int next;

  @Setup(Level.Trial)
  public void setup() {
    fixture = new IngestFixture(layout, otherWorkers);
    stream = fixture.stream;
    applier = fixture.applier;
  }

  /** Decode + hash + apply: the event thread's work per message. */
  @Benchmark
  @OperationsPerInvocation(BLOCK_EVENTS)
  public int decodeAndApply() {
    byte[] p = stream.payloads[next];
    next = (next + 1) & (CYCLE - 1);
    return fixture.path.apply(p);
  }

  /** Hash + apply of already decoded batches. */
  @Benchmark
  @OperationsPerInvocation(BLOCK_EVENTS)
  public int applyOnly() {
    int r = applier.apply(stream.batches[next]);
    next = (next + 1) & (CYCLE - 1);
    return r;
  }

  /** Decode alone. */
  @Benchmark
  @OperationsPerInvocation(BLOCK_EVENTS)
  public int decodeOnly() {
    byte[] p = stream.payloads[next];
    next = (next + 1) & (CYCLE - 1);
    return fixture.path.decode(p);
  }
}
