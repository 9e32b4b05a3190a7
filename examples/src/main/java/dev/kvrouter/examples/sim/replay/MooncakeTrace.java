package dev.kvrouter.examples.sim.replay;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The Mooncake trace format ({@code ../shared/traces/README.md}): one JSON object per line with
 * {@code timestamp} (ms), {@code input_length}, {@code output_length} and {@code hash_ids} (one id per 512-token
 * prompt block; equal ids at equal positions share a prefix).
 */
public final class MooncakeTrace {

  /** Tokens per hash id in the Mooncake release. */
  public static final int HASH_BLOCK_TOKENS = 512;

  /**
   * One request of the trace.
   *
   * @param timestampMillis arrival time from the start of the trace
   * @param inputLength prompt tokens
   * @param outputLength tokens to generate
   * @param hashIds one id per 512-token block of the prompt
   */
  public record Request(long timestampMillis, int inputLength, int outputLength, int[] hashIds) {

    /**
     * The prompt as token ids: each hash id becomes a fixed block of 512 ids, so equal ids give equal blocks,
     * and the last block is trimmed to {@code inputLength}. Blocks beyond the hash ids (a record shorter in ids than
     * in tokens) are filler of this request alone, keyed on {@code requestIndex} and the block, as {@code
     * workload.MooncakeReplay} keys them: keyed on the block only, every such request would share its filler.
     * Ids stay below {@code vocab}.
     *
     * @param requestIndex the request's position in the trace
     */
    public int[] promptTokens(int vocab, int requestIndex) {
      int[] t = new int[inputLength];
      for (int i = 0; i < inputLength; i++) {
        int block = i / HASH_BLOCK_TOKENS;
        // filler ids are negative, so never a trace's hash id, and distinct per request and block
        long id = block < hashIds.length ? hashIds[block] : ~(((long) requestIndex << 32) | block);
        t[i] = token(id, i % HASH_BLOCK_TOKENS, vocab);
      }
      return t;
    }

    private static int token(long id, int pos, int vocab) {
      long z = id * 0x9E3779B97F4A7C15L + pos * 0xBF58476D1CE4E5B9L;
      z = (z ^ (z >>> 31)) * 0x94D049BB133111EBL;
      z ^= z >>> 29;
      // leave the first 1000 ids (special and control tokens in real vocabularies) unused
      return 1000 + (int) Math.floorMod(z, (long) (vocab - 1000));
    }
  }

  private MooncakeTrace() {}

  public static List<Request> read(Path file) throws IOException {
    ObjectMapper json = new ObjectMapper();
    List<Request> out = new ArrayList<>();
    try (BufferedReader r = Files.newBufferedReader(file)) {
      String line;
      int n = 0;
      while ((line = r.readLine()) != null) {
        n++;
        if (line.isBlank()) {
          continue;
        }
        JsonNode o = json.readTree(line);
        JsonNode ids = o.get("hash_ids");
        if (o.get("timestamp") == null || o.get("input_length") == null || o.get("output_length") == null
            || ids == null || !ids.isArray()) {
          throw new IOException(file + ":" + n + ": not a Mooncake trace record");
        }
        int[] h = new int[ids.size()];
        for (int i = 0; i < h.length; i++) {
          h[i] = ids.get(i).asInt();
        }
        out.add(new Request(o.get("timestamp").asLong(), o.get("input_length").asInt(),
            o.get("output_length").asInt(), h));
      }
    }
    return out;
  }
}
