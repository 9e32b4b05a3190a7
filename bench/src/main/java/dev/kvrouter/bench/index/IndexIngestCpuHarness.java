package dev.kvrouter.bench.index;

import dev.kvrouter.index.wire.WireLayout;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * Ingestion per core, measured by the thread's CPU time instead of wall time: on a shared machine the
 * scheduler takes the core away for long stretches, which JMH's wall-clock throughput counts as our cost.
 * Same stream and work as {@link IndexIngestBenchmark#decodeAndApply} ({@link IngestFixture}: decode, hash,
 * apply; 16 stores and 16 removes per batch). Reports CPU-time and wall rates side by side, median of
 * {@code rounds}, for the whole path and for decoding alone (apply = the difference).
 *
 * <p>Run: {@code java -Xms2g -Xmx2g -cp bench/target/benchmarks.jar dev.kvrouter.bench.index.IndexIngestCpuHarness
 * bench/results/index-ingest-cpu.json [layouts [otherWorkers]]}; {@code layouts} (e.g. {@code VLLM_ARRAY,VLLM_MAP})
 * and {@code otherWorkers} (e.g. {@code 0,63}) narrow the run to some configurations ({@code -} as the output
 * path prints only).
 */
public final class IndexIngestCpuHarness {

  private static final int ROUNDS = 15;

  private IndexIngestCpuHarness() {}

  public static void main(String[] args) throws IOException {
    Path out = args.length > 0 && !args[0].equals("-") ? Path.of(args[0]) : null;
    // optional filters, for a quick look at one configuration: layouts (comma-separated), other workers
    WireLayout[] layouts = args.length > 1
        ? Arrays.stream(args[1].split(",")).map(WireLayout::valueOf).toArray(WireLayout[]::new)
        : new WireLayout[] {WireLayout.VLLM_MAP, WireLayout.VLLM_ARRAY};
    int[] othersList = args.length > 2
        ? Arrays.stream(args[2].split(",")).mapToInt(Integer::parseInt).toArray()
        : new int[] {0, 63};
    List<String> lines = new ArrayList<>();
    for (WireLayout layout : layouts) {
      for (int others : othersList) {
        IngestFixture f = new IngestFixture(layout, others);
        double[] full = rates(f, false);
        double[] decode = rates(f, true);
        double nsFull = 1e9 / full[0];
        double nsDecode = 1e9 / decode[0];
        String line = String.format(Locale.ROOT,
            "{\"layout\": \"%s\", \"other_workers\": %d, \"block_events_per_cpu_second_median\": %.0f, "
                + "\"block_events_per_cpu_second_p10\": %.0f, \"block_events_per_wall_second_median\": %.0f, "
                + "\"decode_block_events_per_cpu_second_median\": %.0f, \"cpu_ns_per_block_event\": %.1f, "
                + "\"decode_cpu_ns_per_block_event\": %.1f, \"apply_cpu_ns_per_block_event\": %.1f, "
                + "\"rounds\": %d, \"block_events_per_round\": %d, \"load_average\": %.2f}",
            layout, others, full[0], full[1], full[2], decode[0], nsFull, nsDecode, nsFull - nsDecode, ROUNDS,
            IngestFixture.CYCLE * f.stream.blockEventsPerBatch,
            ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
        System.out.println(line);
        lines.add(line);
      }
    }
    if (out != null) {
      Files.writeString(out, "[\n  " + String.join(",\n  ", lines) + "\n]\n", StandardCharsets.UTF_8);
    }
  }

  /** {median CPU rate, p10 CPU rate, median wall rate} in block events per second. */
  private static double[] rates(IngestFixture f, boolean decodeOnly) {
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    double[] cpuRate = new double[ROUNDS];
    double[] wallRate = new double[ROUNDS];
    long sink = 0;
    byte[][] payloads = f.stream.payloads;
    for (int round = -5; round < ROUNDS; round++) { // 5 warm-up rounds
      long c0 = mx.getCurrentThreadCpuTime();
      long w0 = System.nanoTime();
      for (byte[] p : payloads) {
        sink += decodeOnly ? f.path.decode(p) : f.path.apply(p);
      }
      long wall = System.nanoTime() - w0;
      long cpu = mx.getCurrentThreadCpuTime() - c0;
      if (round >= 0) {
        double events = (double) payloads.length * f.stream.blockEventsPerBatch;
        cpuRate[round] = events / (cpu / 1e9);
        wallRate[round] = events / (wall / 1e9);
      }
    }
    Arrays.sort(cpuRate);
    Arrays.sort(wallRate);
    if (sink == 42) {
      System.out.println();
    }
    return new double[] {cpuRate[ROUNDS / 2], cpuRate[ROUNDS / 10], wallRate[ROUNDS / 2]};
  }
}
