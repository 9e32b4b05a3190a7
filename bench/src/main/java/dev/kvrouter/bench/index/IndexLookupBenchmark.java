package dev.kvrouter.bench.index;

import dev.kvrouter.index.PrefixCursor;
import dev.kvrouter.index.PrefixMatches;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Group;
import org.openjdk.jmh.annotations.GroupThreads;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Prefix lookup latency over {@link LookupFixture}: a 128-block request against 64 workers that all hold its
 * first block and hold staggered prefixes of it, in an index of {@code background} other blocks. Sampled per
 * call (p50/p99 from {@code SampleTime}).
 *
 * <p>{@code concurrent}: a writer thread runs at the same time on the same index, storing and removing the
 * request's own blocks on 8 churn workers plus background blocks ({@code writeTarget=request}), so lookups race
 * with writes to the very slots they read, or background blocks only ({@code writeTarget=background}); at
 * {@code writeRate} block events per second ({@link PacedWriter}, batches of 16), 0 for flat out. The writer's
 * achieved rate is printed after each iteration ("writer: ... events/s"). {@code alone}: the same lookup without
 * the writer, for the ratio.
 * {@code naive}: the same lookup over a straightforward {@code ConcurrentHashMap<Long, Set<WorkerId>>} index
 * (block to holders; per block, keep the workers still matching), the design a first version would use, as a
 * machine-independent yardstick measured in the same run. {@code shape} picks who holds what
 * ({@code staggered}, {@code staggered_gpu}, {@code realistic}), {@code jump} the lookup's jump search stride, e.g.
 * {@code -p shape=staggered_gpu,realistic -p jump=0,16}. {@link IndexLookupHarness} measures the same with
 * preemption filtered out.
 */
@State(Scope.Group)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"-Xms3g", "-Xmx3g"})
public class IndexLookupBenchmark {

  @Param({"64"})
  public int workers;

  @Param({"128"})
  public int blocks;

  @Param({"1000000"})
  public int background;

  /** Who holds what of the request ({@link LookupFixture}). */
  @Param({"staggered"})
  public String shape;

  /**
   * {@code IndexConfig.prefixJump}: 0 reads every block, else the jump search's stride; {@code default} runs the
   * product's default configuration ({@code IndexConfig.defaults()}, what {@code kvrouter.yaml} gets without
   * {@code events.prefix_jump}).
   */
  @Param({"default"})
  public String jump;

  /** The concurrent writer's rate in block events per second, 0 for flat out. */
  @Param({"0"})
  public long writeRate;

  /**
   * How the paced writer waits between batches: {@code spin} (batches of 16, busy-waiting: the historic writer) or
   * {@code park} (batches of 160, parked between them, as an event thread waits in {@code poll}; {@link PacedWriter}).
   */
  @Param({"spin"})
  public String writeIdle;

  /** Which blocks the concurrent writer touches: {@code request} or {@code background} ({@link LookupFixture}). */
  @Param({"request"})
  public String writeTarget;

  /**
   * Whose blocks the writer churns: {@code extra} (8 more workers, ordinals 64-71: a 72-worker fleet whose lookups
   * span two ordinal words while the writer runs) or {@code inside} (8 of the {@code workers}).
   */
  @Param({"extra"})
  public String churn;

  private LookupFixture fixture;
  private PrefixCursor cursor;
  private PrefixMatches out;
  private PacedWriter writer;
  private long iterationStart;
  private long iterationOps;

  @Setup(Level.Trial)
  public void setup() {
    fixture = new LookupFixture(workers, blocks, background, shape, LookupFixture.jump(jump), churnInside(churn));
    cursor = fixture.index.newCursor();
    out = new PrefixMatches();
    writer = PacedWriter.of(fixture, LookupFixture.WriteTarget.of(writeTarget), writeRate, writeIdle);
  }

  static boolean churnInside(String churn) {
    return switch (churn) {
      case "extra" -> false;
      case "inside" -> true;
      default -> throw new IllegalArgumentException("churn must be extra or inside, was " + churn);
    };
  }

  @Setup(Level.Iteration)
  public void startIteration() {
    iterationStart = System.nanoTime();
    iterationOps = fixture.ops();
  }

  /** Prints the writer's achieved rate (JMH keeps no counter for a {@code SampleTime} group member). */
  @TearDown(Level.Iteration)
  public void endIteration() {
    long ops = fixture.ops() - iterationOps;
    if (ops > 0) {
      double s = (System.nanoTime() - iterationStart) / 1e9;
      System.out.printf(Locale.ROOT, "%nwriter: %.0f events/s (target %s)%n", ops / s,
          writeRate == 0 ? "flat out" : Long.toString(writeRate));
    }
  }

  @Benchmark
  @Group("concurrent")
  @GroupThreads(1)
  public int lookup() {
    fixture.index.lookup(cursor, fixture.request, blocks, out);
    return out.size();
  }

  /** One store or remove per call (flat out), or one paced batch of them. */
  @Benchmark
  @Group("concurrent")
  @GroupThreads(1)
  public int write() {
    return writer.step();
  }

  /** The lookup without filling the answer ({@code longestHeldPrefix}): what {@code PrefixCursor.finish} costs. */
  @Benchmark
  @Group("aloneNoAnswer")
  @GroupThreads(1)
  public int longestOnly() {
    return fixture.index.longestHeldPrefix(cursor, fixture.request, blocks);
  }

  @Benchmark
  @Group("naive")
  @GroupThreads(1)
  public int naiveLookup() {
    return fixture.naiveLookup();
  }

  @Benchmark
  @Group("alone")
  @GroupThreads(1)
  public int lookupAlone() {
    fixture.index.lookup(cursor, fixture.request, blocks, out);
    return out.size();
  }
}
