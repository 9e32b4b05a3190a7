package dev.kvrouter.examples.workload;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Replays a Mooncake trace as token-id completions. Each {@code hash_id} becomes a fixed block of token ids
 * seeded from the id (equal ids give equal blocks, so the trace's prefix sharing becomes real token sharing)
 * and the last block is trimmed to {@code input_length}. Arrivals keep the trace's timestamps divided by
 * {@code speed} (0.8 replays at 80% of the trace's rate, as in Dynamo's A/B), rebased so the first selected
 * request arrives at 0.
 *
 * <p>{@code block} scales prompts down for cheap runs: each hash id becomes {@code block} tokens instead of 512
 * and the trimmed last block shrinks in proportion (rounded up), so 64 keeps every sharing relation of the
 * trace at one eighth of the prefill work. Output lengths stay as traced (cap them with {@code max-output}).
 * If a record has fewer ids than its length needs, the missing blocks are unique to that request.
 *
 * <p>Options: {@code file=<shared/traces/mooncake_synthetic_trace.jsonl> speed=1 max=0 (all) from=0 to=0 (ms,
 * 0 = end) block=512 max-output=0 (no cap) seed=0 vocab=1000..128000}.
 */
public final class MooncakeReplay {

  public static final String NAME = "mooncake";

  private MooncakeReplay() {}

  public static Workload build(WorkloadOptions o) {
    Path file = Path.of(o.string("file", MooncakeTrace.defaultFile().toString()));
    double speed = o.doubleValue("speed", 1.0);
    int max = o.intValue("max", 0);
    long from = o.longValue("from", 0);
    long to = o.longValue("to", 0);
    int block = o.intValue("block", MooncakeTrace.HASH_BLOCK_TOKENS);
    int maxOutput = o.intValue("max-output", 0);
    long seed = o.longValue("seed", 0);
    TokenSpace space = o.tokenSpace();
    o.rejectUnknown(NAME);
    if (!(speed > 0) || block < 1 || block > MooncakeTrace.HASH_BLOCK_TOKENS) {
      throw new IllegalArgumentException(NAME + ": speed must be > 0 and block in [1, 512]");
    }
    if (!Files.isRegularFile(file)) {
      throw new IllegalArgumentException(NAME + ": trace file not found: " + file
          + " (pass file=..., or -Dkvrouter.traces=<dir with " + MooncakeTrace.SYNTHETIC + ">)");
    }
    List<MooncakeTrace.Record> records;
    try {
      records = MooncakeTrace.read(file,
          r -> r.timestampMillis() >= from && (to <= 0 || r.timestampMillis() < to), max);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    long t0 = records.isEmpty() ? 0 : records.get(0).timestampMillis();
    List<WorkloadRequest> out = new ArrayList<>(records.size());
    for (int i = 0; i < records.size(); i++) {
      MooncakeTrace.Record r = records.get(i);
      long arrival = Math.round((r.timestampMillis() - t0) * 1000.0 / speed);
      int output = Math.max(1, maxOutput > 0 ? Math.min(maxOutput, r.outputLength()) : r.outputLength());
      out.add(new WorkloadRequest(i, NAME + "-" + i, Math.max(0, arrival), null,
          Prompt.tokens(segments(r, block, seed, i)), output));
    }
    return new Workload(NAME, o.effective(), space, out);
  }

  /** The prompt of one record as segments: one per hash id, the last trimmed; scaled to {@code block}. */
  static List<Segment> segments(MooncakeTrace.Record r, int block, long seed, int requestIndex) {
    int full = MooncakeTrace.HASH_BLOCK_TOKENS;
    int blocks = (r.inputLength() + full - 1) / full;
    List<Segment> segs = new ArrayList<>(blocks);
    for (int b = 0; b < blocks; b++) {
      int tokens = b < blocks - 1 ? full : r.inputLength() - full * (blocks - 1);
      int scaled = block == full ? tokens : Math.min(block, Math.max(1, (int) Math.ceil(tokens * (double) block / full)));
      long blockSeed = b < r.hashIds().length
          ? hashBlockSeed(seed, r.hashIds()[b])
          : Rng.derive(seed, 51, requestIndex, b);
      segs.add(new Segment(blockSeed, scaled));
    }
    return segs;
  }

  /** The seed of the token block of a hash id: a function of the id (and the workload seed) only. */
  public static long hashBlockSeed(long seed, long hashId) {
    return Rng.derive(seed, 50, hashId);
  }
}
