package dev.kvrouter.bench.overhead;

import dev.kvrouter.extproc.decision.UsageScanner;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The response observer's usage scan over one streamed chat answer as vLLM sends it (an SSE event per token, usage
 * in the last), handed over as Envoy does: one read-only buffer per body chunk of the ext_proc stream. The router
 * runs it on every chunk of every followed response, on the gRPC event loops.
 *
 * <pre>
 * java -jar bench/target/benchmarks.jar UsageScanBenchmark -prof gc
 * java -cp bench/target/benchmarks.jar dev.kvrouter.bench.overhead.UsageScanBenchmark   # thread CPU time per answer
 * </pre>
 *
 * The second form reads the thread's CPU time instead of the wall clock, which on a shared, loaded box counts the
 * time other processes held the CPU.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(1)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class UsageScanBenchmark {

  @Param({"1000"})
  public int tokens;

  List<ByteBuffer> chunks;

  @Setup
  public void setup() {
    String head = "data: {\"id\":\"chatcmpl-7f3a9c2e41d84b0fa1c5e8d2b6a47f10\",\"object\":\"chat.completion.chunk\","
        + "\"created\":1764676800,\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",";
    chunks = new ArrayList<>();
    for (int i = 0; i < tokens; i++) {
      String event = head + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\" token" + i
          + "\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
      chunks.add(ByteBuffer.wrap(event.getBytes(StandardCharsets.UTF_8)).asReadOnlyBuffer());
    }
    String last = head + "\"choices\":[],\"usage\":{\"prompt_tokens\":7200,\"total_tokens\":8200,"
        + "\"completion_tokens\":1000,\"prompt_tokens_details\":{\"cached_tokens\":6000}}}\n\ndata: [DONE]\n\n";
    chunks.add(ByteBuffer.wrap(last.getBytes(StandardCharsets.UTF_8)).asReadOnlyBuffer());
  }

  @Benchmark
  public long streamedAnswer() {
    UsageScanner s = new UsageScanner();
    for (ByteBuffer b : chunks) {
      s.feed(b);
    }
    return s.cachedTokens();
  }

  public static void main(String[] args) {
    UsageScanBenchmark b = new UsageScanBenchmark();
    b.tokens = 1000;
    b.setup();
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    long sink = 0;
    int answers = 2000;
    for (int round = 0; round < 6; round++) { // the first rounds compile
      long cpu = threads.getCurrentThreadCpuTime();
      for (int i = 0; i < answers; i++) {
        sink += b.streamedAnswer();
      }
      double micros = (threads.getCurrentThreadCpuTime() - cpu) / 1e3 / answers;
      System.out.printf(java.util.Locale.ROOT, "round %d: %.1f us of CPU per %d-token answer%n", round, micros,
          b.tokens);
    }
    System.out.println(sink == 6000L * answers * 6 ? "ok" : "wrong usage");
  }
}
