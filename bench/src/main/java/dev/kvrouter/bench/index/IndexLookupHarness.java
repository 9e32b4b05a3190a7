package dev.kvrouter.bench.index;

import dev.kvrouter.index.PrefixCursor;
import dev.kvrouter.index.PrefixMatches;
import java.io.IOException;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.HdrHistogram.Histogram;

/**
 * Lookup latency over {@link LookupFixture} with the scheduler's share made visible. Every lookup is timed
 * ({@code System.nanoTime}); lookups are grouped in chunks of {@value #CHUNK}, and the reader thread's CPU time
 * is read around each chunk. A chunk is <em>clean</em> when its wall time exceeds its CPU time by less than
 * 1% + 2 us, i.e. the thread kept its core for the whole chunk. Percentiles are reported over all lookups and
 * over clean chunks only: the first is what this shared machine gave, the second is what the code costs on a
 * core it owns (the only difference is time spent descheduled). Also reported per scenario: the lookup's
 * optimistic read retries and locked reads per lookup, GC and JIT time during the measurement, and for writer
 * scenarios the writer's achieved rate.
 *
 * <p>Scenarios (comma-separated, run in order on one fixture):
 * <ul>
 *   <li>{@code alone}: lookups only; {@code naive}: the {@code ConcurrentHashMap} yardstick;
 *   <li>{@code w:RATE:TARGET}: a writer thread applies events at RATE events/s (0 = flat out) through
 *       {@link PacedWriter}, TARGET {@code request} (every other op on the request's own blocks) or
 *       {@code background} (never the request's blocks); {@code p:RATE:TARGET} the same with the writer parked
 *       between batches of 160 ({@link PacedWriter#parking}), as an event thread waits in {@code poll};
 *   <li>{@code cold:KIB}: before each timed lookup the reader reads KIB KiB of its own (a lookup whose index lines
 *       another process on the core has evicted);
 *   <li>{@code spin}: a second thread spins on {@code System.nanoTime} without touching the index (what a busy
 *       neighbour core costs by itself);
 *   <li>{@code frozen}: the request writer stops half-way through its cycle (churn workers hold half the request)
 *       and lookups run alone on that state (what the churn workers' extra candidates cost without any write).
 * </ul>
 * Each writer scenario ends by finishing its churn cycle, so the next starts from the fixture's initial state.
 *
 * <p>Run (under the benchmark lock): {@code java -Xms3g -Xmx3g -cp bench/target/benchmarks.jar
 * dev.kvrouter.bench.index.IndexLookupHarness [seconds] [pin|nopin] [out.json|-] [shape] [jump] [scenarios]
 * [extra|inside]}.
 * {@code pin} pins the reader to CPU 0 and the writer to CPU 1; {@code shape} and {@code jump} as in
 * {@link IndexLookupBenchmark}; scenarios default to {@code alone,w:0:request,naive,alone,w:0:request}; the last
 * argument is {@link IndexLookupBenchmark#churn} (default {@code extra}).
 */
public final class IndexLookupHarness {

  private static final int CHUNK = 256;

  private IndexLookupHarness() {}

  public static void main(String[] args) throws Exception {
    double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
    boolean pin = args.length > 1 && args[1].equals("pin");
    Path out = args.length > 2 && !args[2].equals("-") ? Path.of(args[2]) : null;
    String shape = args.length > 3 ? args[3] : "staggered";
    String jumpArg = args.length > 4 ? args[4] : "default";
    int jump = LookupFixture.jump(jumpArg);
    String scenarios = args.length > 5 ? args[5] : "alone,w:0:request,naive,alone,w:0:request";
    String churn = args.length > 6 ? args[6] : "extra";
    LookupFixture f = new LookupFixture(64, 128, 1_000_000, shape, jump,
        IndexLookupBenchmark.churnInside(churn));
    List<String> results = new ArrayList<>();
    for (String scenario : scenarios.split(",")) {
      results.add(run(f, scenario.trim(), seconds / 2, pin).replace("{\"scenario\"",
          "{\"shape\": \"" + shape + "\", \"jump\": " + f.index.config().prefixJump() + ", \"jumpParam\": \""
              + jumpArg + "\", \"churn\": \"" + churn + "\", \"scenario\""));
    }
    String json = "[\n  " + String.join(",\n  ", results) + "\n]\n";
    System.out.print(json);
    if (out != null) {
      Files.writeString(out, json, StandardCharsets.UTF_8);
    }
  }

  private static int coldBytes;
  private static long[] evictBuffer = new long[0];

  /** Reads {@code bytes} of a private buffer, one load per cache line, pushing the index's lines out of cache. */
  private static long evict(int bytes) {
    int n = bytes / 8;
    if (evictBuffer.length < n) {
      evictBuffer = new long[n];
    }
    long[] b = evictBuffer;
    long x = 0;
    for (int i = 0; i < n; i += 8) {
      x += b[i]++;
    }
    return x;
  }

  private static String run(LookupFixture f, String scenario, double seconds, boolean pin) throws Exception {
    coldBytes = 0;
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    AtomicBoolean stop = new AtomicBoolean();
    AtomicLong writes = new AtomicLong();
    String[] parts = scenario.split(":");
    long rate = -1;
    PacedWriter paced = null;
    Runnable background = null;
    if (parts[0].equals("w") || parts[0].equals("p")) {
      rate = Long.parseLong(parts[1]);
      paced = PacedWriter.of(f, LookupFixture.WriteTarget.of(parts[2]), rate, parts[0].equals("p") ? "park" : "spin");
      PacedWriter p = paced;
      background = () -> {
        long n = 0;
        while (!stop.get()) {
          for (int i = 0; i < 64; i++) {
            n += p.step();
          }
          writes.lazySet(n);
        }
      };
    } else if (parts[0].equals("spin")) {
      background = () -> {
        long n = 0;
        while (!stop.get()) {
          n += System.nanoTime() & 1;
        }
        writes.lazySet(n);
      };
    } else if (parts[0].equals("frozen")) {
      for (int i = 0; i < LookupFixture.CHURN_WORKERS * f.blocks / 2; i++) {
        f.writeNext(LookupFixture.WriteTarget.REQUEST);
      }
    } else if (parts[0].equals("cold")) {
      // before each timed lookup, the reader reads parts[1] KiB of its own (outside the timing): what a lookup
      // costs when another process on this core or its hyperthread sibling has evicted the index's lines
      coldBytes = Integer.parseInt(parts[1]) * 1024;
    } else if (!parts[0].equals("alone") && !parts[0].equals("naive")) {
      throw new IllegalArgumentException("unknown scenario " + scenario);
    }
    Thread writer = null;
    if (background != null) {
      Runnable body = background;
      writer = new Thread(() -> {
        if (pin) {
          ThreadPin.pin(1);
        }
        body.run();
      }, "writer");
      writer.setDaemon(true);
      writer.start();
    }
    boolean pinned = pin && ThreadPin.pin(0);
    PrefixCursor cursor = f.index.newCursor();
    PrefixMatches matches = new PrefixMatches();
    boolean naive = scenario.equals("naive");
    long sink = 0;
    // warm-up: half the time, same loop
    long warmEnd = System.nanoTime() + (long) (seconds * 0.5e9);
    while (System.nanoTime() < warmEnd) {
      for (int k = 0; k < CHUNK; k++) {
        sink += naive ? f.naiveLookup() : lookup(f, cursor, matches);
      }
    }
    Histogram all = new Histogram(3600_000_000_000L, 3);
    Histogram clean = new Histogram(3600_000_000_000L, 3);
    long[] buf = new long[CHUNK];
    long chunks = 0;
    long cleanChunks = 0;
    long cpuTotal = 0;
    long wallTotal = 0;
    long w0 = writes.get();
    long retries0 = cursor.optimisticRetries();
    long locked0 = cursor.lockedReads();
    long[] gc0 = gcCountAndMillis();
    long jit0 = ManagementFactory.getCompilationMXBean().getTotalCompilationTime();
    long writerCpu0 = writer == null ? 0 : mx.getThreadCpuTime(writer.getId());
    long end = System.nanoTime() + (long) (seconds * 1e9);
    long start = System.nanoTime();
    while (System.nanoTime() < end) {
      long c0 = mx.getCurrentThreadCpuTime();
      long t0 = System.nanoTime();
      for (int k = 0; k < CHUNK; k++) {
        if (coldBytes > 0) {
          sink += evict(coldBytes);
        }
        long s = System.nanoTime();
        sink += naive ? f.naiveLookup() : lookup(f, cursor, matches);
        buf[k] = System.nanoTime() - s;
      }
      long t1 = System.nanoTime();
      long c1 = mx.getCurrentThreadCpuTime();
      long wall = t1 - t0;
      long cpu = c1 - c0;
      cpuTotal += cpu;
      wallTotal += wall;
      chunks++;
      boolean isClean = wall - cpu < wall / 100 + 2_000;
      for (long v : buf) {
        all.recordValue(v);
        if (isClean) {
          clean.recordValue(v);
        }
      }
      if (isClean) {
        cleanChunks++;
      }
    }
    long elapsed = System.nanoTime() - start;
    long writesDone = writes.get() - w0;
    long writerCpu = writer == null ? 0 : mx.getThreadCpuTime(writer.getId()) - writerCpu0;
    long[] gc1 = gcCountAndMillis();
    long jit1 = ManagementFactory.getCompilationMXBean().getTotalCompilationTime();
    long lookups = Math.max(1, all.getTotalCount());
    double retries = (cursor.optimisticRetries() - retries0) / (double) lookups;
    double locked = (cursor.lockedReads() - locked0) / (double) lookups;
    stop.set(true);
    if (writer != null) {
      writer.join(5_000);
    }
    if (paced != null) {
      f.finishCycle(paced.target());
    } else if (parts[0].equals("frozen")) {
      f.finishCycle(LookupFixture.WriteTarget.REQUEST);
    }
    double load = ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
    return String.format(Locale.ROOT,
        "{\"scenario\": \"%s\", \"write_rate\": %d, \"pinned\": %b, \"lookups\": %d, \"clean_fraction\": %.3f, "
            + "\"all\": %s, \"clean\": %s, \"reader_cpu_over_wall\": %.3f, \"writer_events_per_s\": %.0f, "
            + "\"writer_cpu_over_wall\": %.3f, \"writes_per_lookup\": %.3f, \"retries_per_lookup\": %.5f, "
            + "\"locked_reads_per_lookup\": %.6f, \"gc_count\": %d, \"gc_ms\": %d, \"jit_ms\": %d, "
            + "\"load_average\": %.2f, \"sink\": %d}",
        scenario, rate, pinned, all.getTotalCount(), chunks == 0 ? 0 : cleanChunks / (double) chunks, pct(all),
        pct(clean), cpuTotal / (double) Math.max(1, wallTotal),
        paced == null ? 0 : writesDone / (elapsed / 1e9), writerCpu / (double) elapsed,
        paced == null ? 0 : writesDone / (double) lookups, retries, locked, gc1[0] - gc0[0], gc1[1] - gc0[1],
        jit1 - jit0, load, sink & 1);
  }

  private static long[] gcCountAndMillis() {
    long n = 0;
    long ms = 0;
    for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
      n += Math.max(0, gc.getCollectionCount());
      ms += Math.max(0, gc.getCollectionTime());
    }
    return new long[] {n, ms};
  }

  private static int lookup(LookupFixture f, PrefixCursor cursor, PrefixMatches matches) {
    f.index.lookup(cursor, f.request, f.blocks, matches);
    return matches.size();
  }

  private static String pct(Histogram h) {
    if (h.getTotalCount() == 0) {
      return "null";
    }
    return String.format(Locale.ROOT,
        "{\"count\": %d, \"p50\": %d, \"p90\": %d, \"p99\": %d, \"p99_9\": %d, \"min\": %d, \"max\": %d}",
        h.getTotalCount(), h.getValueAtPercentile(50), h.getValueAtPercentile(90), h.getValueAtPercentile(99),
        h.getValueAtPercentile(99.9), h.getMinValue(), h.getMaxValue());
  }
}
