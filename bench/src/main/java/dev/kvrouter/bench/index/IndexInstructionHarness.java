package dev.kvrouter.bench.index;

import dev.kvrouter.index.PrefixCursor;
import dev.kvrouter.index.PrefixMatches;
import dev.kvrouter.index.wire.WireLayout;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * Instruction counts per operation, for a machine too noisy for wall time: run under
 * {@code valgrind --tool=callgrind --instr-atstart=no}, this warms the code up (JIT), switches callgrind's
 * instrumentation on with {@code callgrind_control} for the measured operations only, and dumps. Instructions
 * do not depend on what else runs on the machine. {@code scripts/bench-index-instructions.sh} drives it.
 *
 * <p>Scenarios: {@code lookup} (the {@link LookupFixture} lookup alone), {@code naive} (the naive index's
 * lookup), {@code ingest-map}/{@code ingest-array} (decode and apply one batch of 32 block events),
 * {@code decode-map}/{@code decode-array} (decode only).
 *
 * <p>Args: {@code scenario warmupOps measuredOps}.
 */
public final class IndexInstructionHarness {

  private IndexInstructionHarness() {}

  public static void main(String[] args) throws Exception {
    String scenario = args[0];
    int warmup = Integer.parseInt(args[1]);
    int measured = Integer.parseInt(args[2]);
    Op op = op(scenario);
    long sink = 0;
    for (int i = 0; i < warmup; i++) {
      sink += op.run(i);
    }
    callgrind("--help"); // loads the process classes now, not in the measured window
    boolean counted = callgrind("-i", "on");
    long t0 = System.nanoTime();
    for (int i = 0; i < measured; i++) {
      sink += op.run(warmup + i);
    }
    long t1 = System.nanoTime();
    if (counted) {
      callgrind("-d");
      callgrind("-i", "off");
    }
    System.out.printf(Locale.ROOT, "scenario=%s measured=%d counted=%b ns_per_op=%.1f sink=%d%n", scenario, measured,
        counted, (t1 - t0) / (double) measured, sink & 1);
  }

  private interface Op {
    int run(int i);
  }

  private static Op op(String scenario) {
    switch (scenario) {
      case "lookup", "naive" -> {
        LookupFixture f = new LookupFixture(64, 128, 1_000_000);
        if (scenario.equals("naive")) {
          return i -> f.naiveLookup();
        }
        PrefixCursor cursor = f.index.newCursor();
        PrefixMatches out = new PrefixMatches();
        return i -> {
          f.index.lookup(cursor, f.request, f.blocks, out);
          return out.size();
        };
      }
      default -> {
        WireLayout layout = scenario.endsWith("array") ? WireLayout.VLLM_ARRAY : WireLayout.VLLM_MAP;
        IngestFixture f = new IngestFixture(layout, 0);
        byte[][] payloads = f.stream.payloads;
        int mask = IngestFixture.CYCLE - 1;
        if (scenario.startsWith("decode")) {
          return i -> f.path.decode(payloads[i & mask]);
        }
        return i -> f.path.apply(payloads[i & mask]);
      }
    }
  }

  /** Runs {@code callgrind_control <args> <pid>}; false when not under callgrind. */
  private static boolean callgrind(String... args) throws Exception {
    String[] cmd = new String[args.length + 2];
    cmd[0] = "callgrind_control";
    System.arraycopy(args, 0, cmd, 1, args.length);
    cmd[cmd.length - 1] = Long.toString(ProcessHandle.current().pid());
    try {
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD)
          .start();
      return p.waitFor(120, TimeUnit.SECONDS) && p.exitValue() == 0 && underValgrind();
    } catch (java.io.IOException e) {
      return false;
    }
  }

  private static boolean underValgrind() {
    String preload = System.getenv("LD_PRELOAD");
    return preload != null && preload.contains("valgrind");
  }
}
