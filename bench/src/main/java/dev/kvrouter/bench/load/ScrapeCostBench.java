package dev.kvrouter.bench.load;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.sun.net.httpserver.HttpServer;
import dev.kvrouter.bench.overhead.EnvoyOverheadBench;
import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.MetricsScraper;
import dev.kvrouter.extproc.load.WorkerHealth;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * What scraping the fleet's metrics costs the router: the real {@link MetricsScraper} on its production interval
 * against {@code --workers} loopback HTTP servers, each serving a vLLM page rendered by the real prometheus_client
 * (the parser's golden fixtures, scripts/fixtures/vllm_metrics.py) as vLLM serves it: {@code /metrics} the whole
 * page ({@code --page}, default every family of vLLM's v1 engine), {@code /metrics/} what prometheus_client
 * returns for the scraper's filtered request ({@code --filtered-page}); {@code --filter false} scrapes the whole
 * page as before the filter. Reports the process's CPU per scrape, the HTTP servers' own threads subtracted
 * (they live in this JVM; the scraper's side includes every thread it starts and ends, which per-thread counters
 * would miss), and the threads the JVM started per scrape. Run it with the {@code -XX:ActiveProcessorCount} of
 * the machine in question: the JDK's HttpClient and CompletableFuture behave differently below 3 CPUs.
 *
 * <pre>
 * java -cp bench/target/benchmarks.jar dev.kvrouter.bench.load.ScrapeCostBench \
 *     [--workers 8] [--interval-ms 250] [--warmup-seconds 20] [--seconds 20] [--filter true]
 *     [--page vllm_full.prom] [--filtered-page vllm_full_filtered.prom] [--out bench/results/scrape-cost.json]
 * </pre>
 */
public final class ScrapeCostBench {

  public static void main(String[] args) throws Exception {
    Map<String, String> opt = EnvoyOverheadBench.options(args);
    int workers = Integer.parseInt(opt.getOrDefault("workers", "8"));
    long intervalMillis = Long.parseLong(opt.getOrDefault("interval-ms", "250"));
    int seconds = Integer.parseInt(opt.getOrDefault("seconds", "20"));
    int warmupSeconds = Integer.parseInt(opt.getOrDefault("warmup-seconds", "20"));
    Path out = Path.of(opt.getOrDefault("out", "bench/results/scrape-cost.json"));
    Path root = Path.of(System.getProperty("kvrouter.root", "."));
    boolean filter = Boolean.parseBoolean(opt.getOrDefault("filter", "true"));
    Path fixtures = root.resolve("ext-proc/src/test/resources/fixtures/metrics");
    byte[] page = Files.readAllBytes(fixtures.resolve(opt.getOrDefault("page", "vllm_full.prom")));
    byte[] filteredPage = Files.readAllBytes(fixtures.resolve(opt.getOrDefault("filtered-page",
        "vllm_full_filtered.prom")));
    EnvoyOverheadBench.quietLogs();
    // vLLM's server (uvicorn) sets TCP_NODELAY; without it the JDK server's separate header and body writes wait
    // out the client's delayed ACK, ~40 ms a scrape
    System.setProperty("sun.net.httpserver.nodelay", "true");

    List<HttpServer> servers = new ArrayList<>();
    ExecutorService serverThreads = Executors.newFixedThreadPool(2, r -> new Thread(r, "bench-http-server"));
    WorkerRegistry registry = new WorkerRegistry();
    List<Worker> fleet = new ArrayList<>();
    for (int i = 0; i < workers; i++) {
      HttpServer s = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 64);
      s.setExecutor(serverThreads);
      s.createContext("/metrics", ex -> {
        byte[] body = ex.getRequestURI().getPath().equals("/metrics/") ? filteredPage : page;
        ex.getResponseHeaders().add("Content-Type", "text/plain; version=0.0.4");
        ex.sendResponseHeaders(200, body.length);
        ex.getResponseBody().write(body);
        ex.close();
      });
      s.start();
      servers.add(s);
      fleet.add(new Worker("w" + i, "127.0.0.1", s.getAddress().getPort(), "m", List.of(), Worker.Role.BOTH, null, 1,
          0, 1, "http://127.0.0.1:" + s.getAddress().getPort() + "/metrics", false, Map.of()));
    }
    registry.replace(fleet);
    LoadLedger ledger = new LoadLedger(System::nanoTime, TimeUnit.MINUTES.toNanos(5), 1000);
    WorkerHealth health = new WorkerHealth(System::nanoTime, 3, 5, TimeUnit.SECONDS.toNanos(30));
    ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor();
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    com.sun.management.OperatingSystemMXBean os =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    Map<String, Object> report = new LinkedHashMap<>();
    try (MetricsScraper scraper = new MetricsScraper(registry, ledger, health, System::nanoTime,
        Duration.ofSeconds(2), 4 << 20, filter)) {
      scraper.start(scheduler, intervalMillis);
      Thread.sleep(warmupSeconds * 1000L); // JIT, connections, pools
      long scrapes0 = scraper.counts()[0];
      long bytes0 = scraper.bytesRead();
      long cpu0 = os.getProcessCpuTime();
      long server0 = serverCpu(threads);
      long started0 = threads.getTotalStartedThreadCount();
      Map<String, Long> byThread0 = cpuByThread(threads);
      long jit0 = ManagementFactory.getCompilationMXBean().getTotalCompilationTime();
      long[] gc0 = gc();
      long alloc0 = allocated(threads);
      long t0 = System.nanoTime();
      Thread.sleep(seconds * 1000L);
      long wall = System.nanoTime() - t0;
      long scrapes = scraper.counts()[0] - scrapes0;
      long cpu = os.getProcessCpuTime() - cpu0;
      long server = serverCpu(threads) - server0;
      long started = threads.getTotalStartedThreadCount() - started0;
      Map<String, Long> byThread1 = cpuByThread(threads);
      long jit = ManagementFactory.getCompilationMXBean().getTotalCompilationTime() - jit0;
      long[] gc1 = gc();
      long alloc = allocated(threads) - alloc0;
      Map<String, Double> perScrape = new java.util.TreeMap<>();
      byThread1.forEach((name, c) -> {
        double us = (c - byThread0.getOrDefault(name, 0L)) / 1e3 / Math.max(1, scrapes);
        if (us >= 1) {
          perScrape.merge(name.replaceAll("\\d+", "#"), us, Double::sum);
        }
      });
      report.put("machine", Map.of("cpus", Runtime.getRuntime().availableProcessors(),
          "commonPoolParallelism", java.util.concurrent.ForkJoinPool.getCommonPoolParallelism(),
          "java", System.getProperty("java.version"), "loadAverage", os.getSystemLoadAverage()));
      report.put("workers", workers);
      report.put("intervalMillis", intervalMillis);
      report.put("filter", filter);
      report.put("pageBytes", page.length);
      report.put("filteredPageBytes", filteredPage.length);
      report.put("bytesReadPerScrape", (double) (scraper.bytesRead() - bytes0) / scrapes);
      report.put("seconds", wall / 1e9);
      report.put("scrapes", scrapes);
      report.put("failedScrapes", scraper.counts()[1]);
      report.put("processCpuMicrosPerScrape", cpu / 1e3 / scrapes);
      report.put("serverCpuMicrosPerScrape", server / 1e3 / scrapes);
      report.put("scraperCpuMicrosPerScrape", (cpu - server) / 1e3 / scrapes);
      report.put("scraperCpuMillisPerSecond", (cpu - server) / 1e6 / (wall / 1e9));
      report.put("threadsStartedPerScrape", (double) started / scrapes);
      report.put("liveThreadsCpuMicrosPerScrape", perScrape);
      report.put("jitMillis", jit);
      report.put("gcCollections", gc1[0] - gc0[0]);
      report.put("gcMillis", gc1[1] - gc0[1]);
      report.put("liveThreadsAllocatedBytesPerScrape", (double) alloc / scrapes);
    } finally {
      scheduler.shutdownNow();
      servers.forEach(s -> s.stop(0));
      serverThreads.shutdownNow();
    }
    Files.createDirectories(out.toAbsolutePath().getParent());
    new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValue(out.toFile(), report);
    System.out.println(new ObjectMapper().writeValueAsString(report));
  }

  private static long[] gc() {
    long n = 0;
    long ms = 0;
    for (java.lang.management.GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
      n += Math.max(0, b.getCollectionCount());
      ms += Math.max(0, b.getCollectionTime());
    }
    return new long[] {n, ms};
  }

  /** Bytes allocated by the live threads (the scraper's, the servers' and this one). */
  private static long allocated(ThreadMXBean threads) {
    long sum = 0;
    for (long id : threads.getAllThreadIds()) {
      sum += Math.max(0, ((com.sun.management.ThreadMXBean) threads).getThreadAllocatedBytes(id));
    }
    return sum;
  }

  /** CPU time of every live thread, by name and id (threads that ended meanwhile are not in it). */
  private static Map<String, Long> cpuByThread(ThreadMXBean threads) {
    Map<String, Long> m = new java.util.HashMap<>();
    for (ThreadInfo t : threads.getThreadInfo(threads.getAllThreadIds())) {
      if (t != null) {
        m.put(t.getThreadName() + "@" + t.getThreadId(), Math.max(0, threads.getThreadCpuTime(t.getThreadId())));
      }
    }
    return m;
  }

  /** CPU of the HTTP servers' threads (dispatchers and handlers), which serve the same pages under any scraper. */
  private static long serverCpu(ThreadMXBean threads) {
    long sum = 0;
    for (ThreadInfo t : threads.getThreadInfo(threads.getAllThreadIds())) {
      if (t != null && (t.getThreadName().startsWith("HTTP-Dispatcher")
          || t.getThreadName().startsWith("bench-http-server"))) {
        long c = threads.getThreadCpuTime(t.getThreadId());
        if (c > 0) {
          sum += c;
        }
      }
    }
    return sum;
  }

  private ScrapeCostBench() {}
}
