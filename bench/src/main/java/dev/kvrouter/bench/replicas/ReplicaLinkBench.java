package dev.kvrouter.bench.replicas;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.kvrouter.bench.overhead.EnvoyOverheadBench;
import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.Reservation;
import dev.kvrouter.extproc.replicas.CurveKeys;
import dev.kvrouter.extproc.replicas.ReplicaSync;
import dev.kvrouter.extproc.replicas.ZmqReplicaLink;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.index.WorkerId;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * What sharing load between router replicas costs: two {@link ZmqReplicaLink}s over loopback TCP, each with its
 * {@link ReplicaSync} and ledger, as two replicas run them. Measures the link threads' own CPU (per thread, from
 * the JVM) while idle and while one replica reserves and releases a long prompt's reservation every few
 * milliseconds (each waited for in the other replica's ledger, reserved and released, before the next), and how
 * long a reservation takes to appear in the other replica's ledger (the delay a peer's decision is blind to it).
 *
 * <pre>
 * java -cp bench/target/benchmarks.jar dev.kvrouter.bench.replicas.ReplicaLinkBench \
 *     [--idle-seconds 10] [--messages 2000] [--interval-us 5000] [--blocks 1000] [--curve false]
 *     [--out bench/results/replica-link.json]
 * </pre>
 *
 * <p>{@code --curve true} runs both links with one generated CURVE key pair ({@code replicas.curve}). ZMQ encrypts
 * and decrypts in its I/O threads, not the link threads: their CPU is reported apart ({@code ioThread...}).
 */
public final class ReplicaLinkBench {

  static final WorkerId W = new WorkerId("w1", 0);

  public static void main(String[] args) throws Exception {
    Map<String, String> opt = EnvoyOverheadBench.options(args);
    int idleSeconds = Integer.parseInt(opt.getOrDefault("idle-seconds", "10"));
    int messages = Integer.parseInt(opt.getOrDefault("messages", "2000"));
    long intervalNanos = TimeUnit.MICROSECONDS.toNanos(Long.parseLong(opt.getOrDefault("interval-us", "5000")));
    int blocks = Integer.parseInt(opt.getOrDefault("blocks", "1000"));
    Path out = Path.of(opt.getOrDefault("out", "bench/results/replica-link.json"));
    CurveKeys curve = Boolean.parseBoolean(opt.getOrDefault("curve", "false")) ? CurveKeys.generate() : null;
    EnvoyOverheadBench.quietLogs();
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();

    LoadLedger ledgerA = new LoadLedger(System::nanoTime, TimeUnit.MINUTES.toNanos(5), 100_000);
    LoadLedger ledgerB = new LoadLedger(System::nanoTime, TimeUnit.MINUTES.toNanos(5), 100_000);
    Map<String, Object> report = new LinkedHashMap<>();
    try (ZmqReplicaLink a = new ZmqReplicaLink("tcp://127.0.0.1:0", List.of(), 65536, Duration.ofSeconds(5),
        curve)) {
      ReplicaSync syncA = new ReplicaSync(1, ledgerA, PrefixOverlapSource.NONE, a, System::nanoTime,
          TimeUnit.SECONDS.toNanos(3));
      ledgerA.setListener(syncA.ledgerListener());
      a.start(syncA);
      try (ZmqReplicaLink b = new ZmqReplicaLink("tcp://127.0.0.1:0", List.of("tcp://127.0.0.1:" + a.port()),
          65536, Duration.ofSeconds(5), curve)) {
        ReplicaSync syncB = new ReplicaSync(2, ledgerB, PrefixOverlapSource.NONE, b, System::nanoTime,
            TimeUnit.SECONDS.toNanos(3));
        ledgerB.setListener(syncB.ledgerListener());
        b.start(syncB);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (syncB.peerCount() == 0) {
          if (System.nanoTime() > deadline) {
            throw new IllegalStateException("B never heard A");
          }
          Thread.sleep(10);
        }

        // idle: heartbeats only
        Thread.sleep(1000);
        long cpu0 = linkCpuNanos(threads);
        long io0 = ioCpuNanos(threads);
        long t0 = System.nanoTime();
        Thread.sleep(TimeUnit.SECONDS.toMillis(idleSeconds));
        double idleMicrosPerSecond = (linkCpuNanos(threads) - cpu0) / 1e3 / ((System.nanoTime() - t0) / 1e9);
        double idleIoMicrosPerSecond = (ioCpuNanos(threads) - io0) / 1e3 / ((System.nanoTime() - t0) / 1e9);

        // loaded: one reservation of a `blocks`-block prompt every interval, released right after it arrived
        long[] hashes = new long[blocks];
        for (int i = 0; i < blocks; i++) {
          hashes[i] = 0x9E3779B97F4A7C15L * (i + 1);
        }
        long[] latency = new long[messages];
        long cpu1 = linkCpuNanos(threads);
        long io1 = ioCpuNanos(threads);
        long start = System.nanoTime();
        for (int i = 0; i < messages; i++) {
          long due = start + i * intervalNanos;
          long wait = due - System.nanoTime();
          if (wait > 0) {
            java.util.concurrent.locks.LockSupport.parkNanos(wait);
          }
          long sent = System.nanoTime();
          Reservation r = ledgerA.reserve(W, blocks * 16, hashes, blocks);
          awaitLive(ledgerB, 1, sent, "reservation " + i);
          latency[i] = System.nanoTime() - sent;
          ledgerA.release(r);
          awaitLive(ledgerB, 0, System.nanoTime(), "the release of reservation " + i);
        }
        double loadedSeconds = (System.nanoTime() - start) / 1e9;
        long loadedCpu = linkCpuNanos(threads) - cpu1;
        long loadedIo = ioCpuNanos(threads) - io1;
        Arrays.sort(latency);
        report.put("idleSeconds", idleSeconds);
        report.put("idleLinkCpuMicrosPerSecond", round(idleMicrosPerSecond));
        report.put("reservations", messages);
        report.put("intervalMicros", intervalNanos / 1000);
        report.put("blocksPerReservation", blocks);
        report.put("deliveryP50Micros", round(latency[messages / 2] / 1e3));
        report.put("deliveryP99Micros", round(latency[(int) Math.min(messages - 1, Math.ceil(messages * 0.99) - 1)]
            / 1e3));
        report.put("deliveryMaxMicros", round(latency[messages - 1] / 1e3));
        // each reservation is two messages (reserved, released) sent by A and applied by B
        report.put("loadedLinkCpuMicrosPerReservation", round(loadedCpu / 1e3 / messages));
        report.put("loadedLinkCpuShareOfACore", round(loadedCpu / 1e9 / loadedSeconds));
        report.put("dropped", a.dropped() + b.dropped());
        report.put("curve", curve != null);
        report.put("idleIoThreadCpuMicrosPerSecond", round(idleIoMicrosPerSecond));
        report.put("loadedIoThreadCpuMicrosPerReservation", round(loadedIo / 1e3 / messages));
        report.put("gaps", syncB.gaps());
      }
    }
    report.put("cpus", Runtime.getRuntime().availableProcessors());
    report.put("loadAverageAtEnd", ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
    if (out.getParent() != null) {
      Files.createDirectories(out.getParent());
    }
    String json = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(report);
    Files.writeString(out, json + "\n");
    System.out.println(json);
  }

  /** Waits until {@code ledger} holds {@code live} reservations (the peer's message applied). */
  static void awaitLive(LoadLedger ledger, long live, long from, String what) {
    long limit = from + TimeUnit.SECONDS.toNanos(5);
    while (ledger.liveReservations() != live) {
      if (System.nanoTime() > limit) {
        throw new IllegalStateException(what + " never reached the other replica");
      }
      // parked, not spinning: on a 2-core box a spinning waiter takes a core from the links it waits for
      java.util.concurrent.locks.LockSupport.parkNanos(20_000);
    }
  }

  /** CPU time of the replica links' own threads (both links run in this JVM). */
  static long linkCpuNanos(ThreadMXBean threads) {
    long sum = 0;
    for (var info : threads.getThreadInfo(threads.getAllThreadIds())) {
      if (info != null && info.getThreadName().startsWith("kvrouter-replicas")) {
        long t = threads.getThreadCpuTime(info.getThreadId());
        sum += Math.max(0, t);
      }
    }
    return sum;
  }

  /** CPU time of ZMQ's own threads (JeroMQ's I/O and reaper threads: where CURVE encrypts and decrypts). */
  static long ioCpuNanos(ThreadMXBean threads) {
    long sum = 0;
    for (var info : threads.getThreadInfo(threads.getAllThreadIds())) {
      if (info != null && (info.getThreadName().startsWith("iothread") || info.getThreadName().startsWith("reaper"))) {
        sum += Math.max(0, threads.getThreadCpuTime(info.getThreadId()));
      }
    }
    return sum;
  }

  static double round(double v) {
    return Math.round(v * 10) / 10.0;
  }
}
