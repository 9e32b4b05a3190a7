package dev.kvrouter.examples.workload;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

/**
 * Reader of the Mooncake FAST'25 trace format: one JSON object per line with {@code timestamp} (ms from the
 * start), {@code input_length}, {@code output_length} and {@code hash_ids} (one id per 512-token prompt block;
 * equal ids at the same position are a shared prefix). See {@code shared/traces/README.md}.
 */
public final class MooncakeTrace {

  /** Tokens per hash id in the Mooncake release. */
  public static final int HASH_BLOCK_TOKENS = 512;
  /** The trace's file name in the shared traces folder. */
  public static final String SYNTHETIC = "mooncake_synthetic_trace.jsonl";

  private static final ObjectMapper JSON = new ObjectMapper();

  /** One line of the trace. */
  public record Record(long timestampMillis, int inputLength, int outputLength, int[] hashIds) {}

  private MooncakeTrace() {}

  /** Reads every record (line order) that {@code keep} accepts, stopping after {@code limit} (0 = no limit). */
  public static List<Record> read(Path file, Predicate<Record> keep, int limit) throws IOException {
    List<Record> out = new ArrayList<>();
    try (BufferedReader r = Files.newBufferedReader(file)) {
      String line;
      int n = 0;
      while ((line = r.readLine()) != null && (limit <= 0 || out.size() < limit)) {
        n++;
        if (line.isBlank()) {
          continue;
        }
        Record rec = parse(line, file + ":" + n);
        if (keep.test(rec)) {
          out.add(rec);
        }
      }
    }
    return out;
  }

  static Record parse(String line, String where) throws IOException {
    JsonNode o;
    try {
      o = JSON.readTree(line);
    } catch (IOException e) {
      throw new IOException(where + ": not JSON", e);
    }
    JsonNode ts = o.get("timestamp");
    JsonNode in = o.get("input_length");
    JsonNode outLen = o.get("output_length");
    JsonNode ids = o.get("hash_ids");
    if (ts == null || !ts.isNumber() || in == null || !in.canConvertToInt() || outLen == null
        || !outLen.canConvertToInt() || ids == null || !ids.isArray()) {
      throw new IOException(where + ": not a Mooncake record (needs numeric timestamp, input_length, "
          + "output_length and a hash_ids array)");
    }
    int[] h = new int[ids.size()];
    for (int i = 0; i < h.length; i++) {
      if (!ids.get(i).canConvertToInt()) {
        throw new IOException(where + ": hash_ids[" + i + "] is not an integer");
      }
      h[i] = ids.get(i).asInt();
    }
    if (in.asInt() < 1 || outLen.asInt() < 0 || ts.asLong() < 0) {
      throw new IOException(where + ": lengths and timestamp out of range");
    }
    return new Record(ts.asLong(), in.asInt(), outLen.asInt(), h);
  }

  /**
   * The shared trace: {@code -Dkvrouter.traces=<dir>} or {@code KVROUTER_TRACES}, else the first
   * {@code shared/traces/} found walking up from the checkout root ({@code kvrouter.root}, else the working
   * directory); worktrees sit at different depths below the folder that holds {@code shared/}.
   */
  public static Path defaultFile() {
    String dir = System.getProperty("kvrouter.traces", System.getenv("KVROUTER_TRACES"));
    if (dir != null && !dir.isBlank()) {
      return Path.of(dir).resolve(SYNTHETIC);
    }
    Path p = Path.of(System.getProperty("kvrouter.root", ".")).toAbsolutePath().normalize();
    for (int up = 0; up < 4 && p != null; up++, p = p.getParent()) {
      Path f = p.resolve("shared").resolve("traces").resolve(SYNTHETIC);
      if (Files.isRegularFile(f)) {
        return f;
      }
    }
    return Path.of(System.getProperty("kvrouter.root", ".")).resolve("../shared/traces").resolve(SYNTHETIC)
        .toAbsolutePath().normalize();
  }
}
