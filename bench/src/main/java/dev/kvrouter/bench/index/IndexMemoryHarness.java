package dev.kvrouter.bench.index;

import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.Tier;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.WorkerView;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * Memory per indexed block: heap used after full GCs, before and after filling an index with
 * {@code residencies} (worker, block) pairs from events, spread over {@code workers} workers, each distinct
 * block held by {@code sharing} workers. Everything the index keeps per block is counted: the shared table,
 * the per-worker engine-hash handles, the overflow bitsets of shared blocks, the sampled parent links of the
 * prefix-closure check (blocks are stored as chains of 128 with their parents, as events store them).
 *
 * <p>Run: {@code java -Xmx8g -XX:+UseParallelGC -cp bench/target/benchmarks.jar
 * dev.kvrouter.bench.index.IndexMemoryHarness 10000000 64 1 bench/results/index-memory.json}
 * (appends one JSON object per run to the file's array).
 */
public final class IndexMemoryHarness {

  private IndexMemoryHarness() {}

  public static void main(String[] args) throws IOException {
    long residencies = args.length > 0 ? Long.parseLong(args[0]) : 10_000_000L;
    int workers = args.length > 1 ? Integer.parseInt(args[1]) : 64;
    int sharing = args.length > 2 ? Integer.parseInt(args[2]) : 1;
    Path out = args.length > 3 ? Path.of(args[3]) : null;

    long before = usedAfterGc();
    KvIndex index = new KvIndex(IndexConfig.defaults().withMaxEntries(residencies * 2, (int) Math.min(
        Integer.MAX_VALUE - 8, residencies)), Clock.systemUTC());
    WorkerView[] views = new WorkerView[workers];
    for (int w = 0; w < workers; w++) {
      views[w] = index.register(WorkerId.of("worker-" + w));
    }
    SplittableRandom r = new SplittableRandom(1);
    long distinct = residencies / sharing;
    long t0 = System.nanoTime();
    long[] parent = new long[workers];
    int[] chain = new int[workers];
    for (long b = 0; b < distinct; b++) {
      long ours = r.nextLong();
      int first = (int) (b % workers);
      for (int k = 0; k < sharing; k++) {
        int w = (first + k * (workers / sharing)) % workers;
        // chains of 128 blocks per worker, stored as the event applier stores them (with their parent, so the
        // prefix-closure check keeps its sampled links)
        if (chain[w]++ % 128 == 0) {
          views[w].store(ours ^ (0x9E3779B97F4A7C15L * (w + 1)), ours, Tier.GPU);
        } else {
          views[w].store(ours ^ (0x9E3779B97F4A7C15L * (w + 1)), ours, Tier.GPU, parent[w]);
        }
        parent[w] = ours;
      }
    }
    long buildNanos = System.nanoTime() - t0;
    long after = usedAfterGc();
    long bytes = after - before;
    String json = String.format(Locale.ROOT,
        "{\"residencies\": %d, \"distinct_blocks\": %d, \"workers\": %d, \"sharing\": %d, \"heap_bytes\": %d, "
            + "\"bytes_per_residency\": %.2f, \"bytes_per_distinct_block\": %.2f, \"estimated_footprint_bytes\": %d, "
            + "\"index_entries\": %d, \"table_blocks\": %d, \"build_seconds\": %.2f, \"jvm\": \"%s\", "
            + "\"max_heap_bytes\": %d}",
        residencies, distinct, workers, sharing, bytes, bytes / (double) residencies, bytes / (double) distinct,
        index.footprintBytes(), index.entries(), index.distinctBlocks(), buildNanos / 1e9,
        System.getProperty("java.vm.version"), Runtime.getRuntime().maxMemory());
    System.out.println(json);
    if (out != null) {
      append(out, json);
    }
    // keep the index reachable until after the measurement
    if (index.entries() < 0) {
      System.out.println(views.length);
    }
  }

  private static long usedAfterGc() {
    MemoryMXBean mem = ManagementFactory.getMemoryMXBean();
    long used = Long.MAX_VALUE;
    for (int i = 0; i < 5; i++) {
      System.gc();
      used = Math.min(used, mem.getHeapMemoryUsage().getUsed());
    }
    return used;
  }

  private static void append(Path out, String json) throws IOException {
    String existing = Files.exists(out) ? Files.readString(out, StandardCharsets.UTF_8).trim() : "";
    String body = existing.isEmpty() || existing.equals("[]") ? "[\n  " + json + "\n]\n"
        : existing.substring(0, existing.lastIndexOf(']')).stripTrailing() + ",\n  " + json + "\n]\n";
    Files.createDirectories(out.toAbsolutePath().getParent());
    Files.writeString(out, body, StandardCharsets.UTF_8);
  }
}
