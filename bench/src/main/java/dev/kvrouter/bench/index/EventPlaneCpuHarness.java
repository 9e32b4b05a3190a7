package dev.kvrouter.bench.index;

import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.events.EventCounter;
import dev.kvrouter.index.events.EventPlaneHealth;
import dev.kvrouter.index.events.EventSource;
import dev.kvrouter.index.events.EventSubscriber;
import dev.kvrouter.index.events.SubscriberConfig;
import dev.kvrouter.index.wire.WireLayout;
import dev.kvrouter.index.wire.ZmqFrames;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The KV event plane's CPU per batch over real ZMQ on 127.0.0.1: N engines, each a PUB socket sending one vLLM
 * batch (map layout, 16 blocks stored in 4 events, 16 removed) every {@code periodMillis}, staggered evenly, and
 * one {@link EventSubscriber} shard following them all. Per measured window: the shard thread's CPU, the CPU of
 * the subscriber's own JeroMQ threads (I/O thread, reaper), and the subscriber's ZMQ waits, each per batch
 * applied. Thread CPU, not wall time, so other load on the machine costs us little beyond cache effects.
 *
 * <p>Run: {@code java -cp bench/target/benchmarks.jar dev.kvrouter.bench.index.EventPlaneCpuHarness out.json
 * [workers=8,64] [windowSeconds=10] [windows=3] [periodMillis=20]} ({@code -} as the output path prints only).
 */
public final class EventPlaneCpuHarness {

  private static final int BLOCK_SIZE = 16;
  private static final int CYCLE = 1024;
  private static final int WARMUP_SECONDS = 4;

  private EventPlaneCpuHarness() {}

  public static void main(String[] args) throws Exception {
    Path out = args.length > 0 && !args[0].equals("-") ? Path.of(args[0]) : null;
    int[] fleets = args.length > 1 ? Arrays.stream(args[1].split(",")).mapToInt(Integer::parseInt).toArray()
        : new int[] {8, 64};
    int windowSeconds = args.length > 2 ? Integer.parseInt(args[2]) : 10;
    int windows = args.length > 3 ? Integer.parseInt(args[3]) : 3;
    int periodMillis = args.length > 4 ? Integer.parseInt(args[4]) : 20;
    EventStream stream = new EventStream(42, CYCLE, 4, 4, BLOCK_SIZE, 256, WireLayout.VLLM_MAP);
    List<String> lines = new ArrayList<>();
    for (int workers : fleets) {
      String line = run(stream, workers, windowSeconds, windows, periodMillis);
      System.out.println(line);
      lines.add(line);
    }
    if (out != null) {
      Files.writeString(out, "[\n" + String.join(",\n", lines) + "\n]\n", StandardCharsets.UTF_8);
    }
  }

  private static String run(EventStream stream, int workers, int windowSeconds, int windows, int periodMillis)
      throws Exception {
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    try (ZContext pubs = new ZContext(1)) {
      ZMQ.Socket[] sockets = new ZMQ.Socket[workers];
      String[] endpoints = new String[workers];
      for (int i = 0; i < workers; i++) {
        sockets[i] = pubs.createSocket(SocketType.PUB);
        sockets[i].setLinger(0);
        endpoints[i] = "tcp://127.0.0.1:" + sockets[i].bindToRandomPort("tcp://127.0.0.1");
      }
      Publisher publisher = new Publisher(sockets, stream, periodMillis);
      Thread pubThread = new Thread(publisher, "bench-publisher");
      pubThread.start();
      Set<Long> before = threadIds();
      KvIndex index = new KvIndex(IndexConfig.defaults(), Clock.systemUTC());
      EventPlaneHealth health = new EventPlaneHealth(new SimpleMeterRegistry(), Clock.systemUTC(), Duration.ZERO);
      Thread[] shard = new Thread[1];
      EventSubscriber sub = new EventSubscriber(index, health, SubscriberConfig.defaults().withShards(1),
          Clock.systemUTC(), r -> {
            Thread t = new Thread(r, "kvrouter-events");
            t.setDaemon(true);
            shard[0] = t;
            return t;
          });
      WorkerId[] ids = new WorkerId[workers];
      try {
        sub.start();
        for (int i = 0; i < workers; i++) {
          ids[i] = WorkerId.of("w" + i);
          sub.add(EventSource.connect(ids[i], "model", BLOCK_SIZE, endpoints[i], null));
        }
        sub.sync(Duration.ofSeconds(10));
        Thread.sleep(TimeUnit.SECONDS.toMillis(WARMUP_SECONDS));
        List<Long> zmqThreads = new ArrayList<>(threadIds());
        zmqThreads.removeAll(before);
        zmqThreads.remove(shard[0].getId());
        double[] shardNs = new double[windows];
        double[] zmqNs = new double[windows];
        double[] polls = new double[windows];
        long applied = 0;
        for (int w = 0; w < windows; w++) {
          long s0 = mx.getThreadCpuTime(shard[0].getId());
          long z0 = cpu(mx, zmqThreads);
          long p0 = sub.polls();
          long b0 = count(health, ids, EventCounter.BATCHES);
          Thread.sleep(TimeUnit.SECONDS.toMillis(windowSeconds));
          long b = count(health, ids, EventCounter.BATCHES) - b0;
          shardNs[w] = (double) (mx.getThreadCpuTime(shard[0].getId()) - s0) / b;
          zmqNs[w] = (double) (cpu(mx, zmqThreads) - z0) / b;
          polls[w] = (double) (sub.polls() - p0) / b;
          applied += b;
        }
        long dropped = count(health, ids, EventCounter.DROPPED_BATCHES);
        long gaps = count(health, ids, EventCounter.GAPS);
        return String.format(Locale.ROOT,
            "{\"workers\": %d, \"period_ms\": %d, \"window_s\": %d, \"windows\": %d, \"batches_applied\": %d, "
                + "\"shard_cpu_ns_per_batch_median\": %.0f, \"zmq_threads_cpu_ns_per_batch_median\": %.0f, "
                + "\"polls_per_batch_median\": %.3f, \"shard_cpu_ns_per_batch\": %s, "
                + "\"zmq_threads_cpu_ns_per_batch\": %s, \"polls_per_batch\": %s, \"zmq_threads\": %d, "
                + "\"gaps\": %d, \"dropped_batches\": %d, \"late_sends\": %d, \"load_average\": %.2f}",
            workers, periodMillis, windowSeconds, windows, applied, median(shardNs), median(zmqNs), median(polls),
            list(shardNs, "%.0f"), list(zmqNs, "%.0f"), list(polls, "%.3f"), zmqThreads.size(), gaps, dropped,
            publisher.late, ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
      } finally {
        publisher.running = false;
        pubThread.join(5000);
        sub.close();
      }
    }
  }

  private static long count(EventPlaneHealth health, WorkerId[] ids, EventCounter c) {
    long n = 0;
    for (WorkerId id : ids) {
      n += health.get(id).count(c);
    }
    return n;
  }

  private static Set<Long> threadIds() {
    Set<Long> ids = new HashSet<>();
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      ids.add(t.getId());
    }
    return ids;
  }

  private static long cpu(ThreadMXBean mx, List<Long> ids) {
    long n = 0;
    for (long id : ids) {
      n += Math.max(0, mx.getThreadCpuTime(id));
    }
    return n;
  }

  private static double median(double[] v) {
    double[] s = v.clone();
    Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

  private static String list(double[] v, String format) {
    List<String> parts = new ArrayList<>();
    for (double d : v) {
      parts.add(String.format(Locale.ROOT, format, d));
    }
    return "[" + String.join(", ", parts) + "]";
  }

  /** Sends each engine's batches in turn, evenly staggered, on one thread (its CPU is not measured). */
  private static final class Publisher implements Runnable {
    final ZMQ.Socket[] sockets;
    final EventStream stream;
    final long stepNanos;
    volatile boolean running = true;
    /** Sends more than a period behind schedule (the machine could not keep the rate). */
    volatile long late;

    Publisher(ZMQ.Socket[] sockets, EventStream stream, int periodMillis) {
      this.sockets = sockets;
      this.stream = stream;
      this.stepNanos = TimeUnit.MILLISECONDS.toNanos(periodMillis) / sockets.length;
    }

    @Override
    public void run() {
      byte[] topic = new byte[0];
      long start = System.nanoTime();
      long period = stepNanos * sockets.length;
      for (long k = 0; running; k++) {
        long due = start + k * stepNanos;
        long wait = due - System.nanoTime();
        if (wait > 0) {
          LockSupport.parkNanos(wait);
        } else if (-wait > period) {
          late++;
        }
        int worker = (int) (k % sockets.length);
        long seq = k / sockets.length;
        ZMQ.Socket s = sockets[worker];
        s.send(topic, ZMQ.SNDMORE);
        s.send(ZmqFrames.seqBytes(seq), ZMQ.SNDMORE);
        s.send(stream.payloads[(int) (seq % CYCLE)], 0);
      }
    }
  }
}
