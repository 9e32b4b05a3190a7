package dev.kvrouter.bench.index;

import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.WorkerView;
import dev.kvrouter.index.events.EventApplier;
import dev.kvrouter.index.wire.EventDecoder;
import dev.kvrouter.index.wire.WireLayout;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.Arrays;
import java.util.Locale;

/**
 * Ingestion per core, measured by the thread's CPU time instead of wall time: on a shared machine the
 * scheduler takes the core away for long stretches, which JMH's wall-clock throughput counts as our cost.
 * Same stream and work as {@link IndexIngestBenchmark#decodeAndApply} (decode, hash, apply; 16 stores and 16
 * removes per batch). Reports wall and CPU-time rates side by side, median of {@code rounds}.
 *
 * <p>Run: {@code java -Xms2g -Xmx2g -cp bench/target/benchmarks.jar dev.kvrouter.bench.index.IndexIngestCpuHarness
 * bench/results/index-ingest-cpu.json}
 */
public final class IndexIngestCpuHarness {

  private IndexIngestCpuHarness() {}

  public static void main(String[] args) throws IOException {
    Path out = args.length > 0 ? Path.of(args[0]) : null;
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    StringBuilder json = new StringBuilder("[\n");
    for (WireLayout layout : new WireLayout[] {WireLayout.VLLM_MAP, WireLayout.VLLM_ARRAY}) {
      for (int others : new int[] {0, 63}) {
        int cycle = 4096;
        EventStream stream = new EventStream(42, cycle, 4, 4, 16, 512, layout);
        KvIndex index = new KvIndex(IndexConfig.defaults(), Clock.systemUTC());
        for (int w = 0; w < others; w++) {
          WorkerView v = index.register(WorkerId.of("other-" + w));
          EventApplier a = new EventApplier(v, "model", 16, BenchHealth.of(v));
          EventStream s = new EventStream(1000 + w, 513, 4, 4, 16, 0, layout);
          for (int b = 0; b < 512; b++) {
            a.apply(s.batches[b]);
          }
        }
        WorkerView view = index.register(WorkerId.of("bench"));
        EventApplier applier = new EventApplier(view, "model", 16, BenchHealth.of(view));
        EventDecoder decoder = new EventDecoder();
        long sink = 0;
        int rounds = 15;
        double[] cpuRate = new double[rounds];
        double[] wallRate = new double[rounds];
        for (int round = -5; round < rounds; round++) { // 5 warm-up rounds
          long c0 = mx.getCurrentThreadCpuTime();
          long w0 = System.nanoTime();
          for (int b = 0; b < cycle; b++) {
            sink += applier.apply(decoder.decode(stream.payloads[b]));
          }
          long wall = System.nanoTime() - w0;
          long cpu = mx.getCurrentThreadCpuTime() - c0;
          if (round >= 0) {
            double events = (double) cycle * stream.blockEventsPerBatch;
            cpuRate[round] = events / (cpu / 1e9);
            wallRate[round] = events / (wall / 1e9);
          }
        }
        Arrays.sort(cpuRate);
        Arrays.sort(wallRate);
        String line = String.format(Locale.ROOT,
            "  {\"layout\": \"%s\", \"other_workers\": %d, \"block_events_per_cpu_second_median\": %.0f, "
                + "\"block_events_per_cpu_second_p10\": %.0f, \"block_events_per_wall_second_median\": %.0f, "
                + "\"rounds\": %d, \"block_events_per_round\": %d, \"sink\": %d}",
            layout, others, cpuRate[rounds / 2], cpuRate[rounds / 10], wallRate[rounds / 2], rounds,
            cycle * stream.blockEventsPerBatch, sink & 1);
        System.out.println(line.trim());
        json.append(line).append(layout == WireLayout.VLLM_ARRAY && others == 63 ? "\n" : ",\n");
      }
    }
    json.append("]\n");
    if (out != null) {
      Files.writeString(out, json.toString(), StandardCharsets.UTF_8);
    }
  }
}
