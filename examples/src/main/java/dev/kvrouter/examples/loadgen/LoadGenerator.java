package dev.kvrouter.examples.loadgen;

import dev.kvrouter.examples.report.LatencyStats;
import dev.kvrouter.examples.report.LoadSample;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.report.RouterSnapshot;
import dev.kvrouter.examples.report.RoutingOverhead;
import dev.kvrouter.examples.report.RunData;
import dev.kvrouter.examples.report.WorkerCounters;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.LockSupport;
import org.HdrHistogram.Histogram;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The open-loop HTTP driver: sends each request of a workload at its arrival time, whatever the state of earlier
 * ones, as a streaming OpenAI request, and records what came back ({@link RequestRecord}), the workers' counters
 * before and after, and their queues every {@code sampleInterval}.
 *
 * <p>Threads, all fixed whatever the request count: the caller's thread schedules the sends (it builds the next
 * body, then parks until its arrival time); the HTTP client's selector thread and {@code clientThreads}
 * executor threads read responses; one timer thread samples worker queues and fires request timeouts. Requests
 * in flight are capped by a semaphore; an arrival that finds it exhausted is recorded as {@code overflow}
 * rather than delayed, so a saturated target shows up as errors, not as a silently slower arrival rate.
 *
 * <p>Conversations stay open loop here, and their later turns resend the answers the workload scripts, not what
 * the worker generated: a multi-turn workload with {@code answers=model} (closed loop, {@link WorkloadRequest#after},
 * {@link WorkloadRequest#answer}) runs as {@code answers=fresh,loop=open} would, and the run's notes say so. Only
 * the virtual-time A/B ({@code ab.VirtualRun}) makes the engines generate the script and waits for each answer.
 *
 * <p>One run at a time per instance; {@link #close()} stops the threads.
 */
public final class LoadGenerator implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(LoadGenerator.class);
  /** Distinct failure details kept as notes per run. */
  private static final int MAX_ERROR_NOTES = 8;
  /** Bound on queue samples kept per run (8 workers at 4 Hz for almost 9 hours). */
  private static final int MAX_LOAD_SAMPLES = 1_000_000;

  private final LoadConfig config;
  private final ExecutorService clientExecutor;
  private final ScheduledThreadPoolExecutor timer;
  private final HttpClient http;
  private final WorkerMetrics metrics;
  private final AtomicInteger threadsCreated = new AtomicInteger();

  public LoadGenerator(LoadConfig config) {
    this.config = config;
    this.clientExecutor = Executors.newFixedThreadPool(config.clientThreads(), threads("kvrouter-loadgen-http"));
    this.timer = new ScheduledThreadPoolExecutor(1, threads("kvrouter-loadgen-timer"));
    this.timer.setRemoveOnCancelPolicy(true);
    this.http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).executor(clientExecutor)
        .connectTimeout(Duration.ofSeconds(10)).build();
    this.metrics = new WorkerMetrics(http, Duration.ofSeconds(5));
  }

  public LoadConfig config() {
    return config;
  }

  public WorkerMetrics metrics() {
    return metrics;
  }

  /** The HTTP client, for admin calls between runs. */
  public HttpClient http() {
    return http;
  }

  /** Threads this generator has created so far (the HTTP client's own selector thread aside). */
  public int threadsCreated() {
    return threadsCreated.get();
  }

  /** Runs the workload once; never throws for request failures, which are counted in the records. */
  public RunData run(Workload workload, RunContext ctx) throws InterruptedException {
    Run run = new Run(workload, ctx);
    return run.execute();
  }

  /** The state of one run; fields shared with callback threads are concurrent or atomic. */
  private final class Run {
    private final Workload workload;
    private final RunContext ctx;
    private final List<WorkloadRequest> requests;
    private final AtomicReferenceArray<RequestRecord> records;
    private final Semaphore permits = new Semaphore(config.maxInFlight());
    private final AtomicInteger inFlight = new AtomicInteger();
    private final AtomicInteger maxInFlight = new AtomicInteger();
    private final Set<StreamingExchange> live = ConcurrentHashMap.newKeySet();
    private final Histogram itl = LatencyStats.newMicrosHistogram();
    private final List<LoadSample> load = Collections.synchronizedList(new ArrayList<>());
    private final List<String> notes = Collections.synchronizedList(new ArrayList<>());
    private final Map<String, Boolean> errorNotes = new ConcurrentHashMap<>();
    private final Set<String> scraping = ConcurrentHashMap.newKeySet();
    private final AtomicLong lastEndNanos = new AtomicLong();
    private final AtomicLong peakHeap = new AtomicLong(-1);
    private long t0;

    Run(Workload workload, RunContext ctx) {
      this.workload = workload;
      this.ctx = ctx;
      int n = config.maxRequests() > 0 ? Math.min(config.maxRequests(), workload.size()) : workload.size();
      this.requests = workload.requests().subList(0, n);
      this.records = new AtomicReferenceArray<>(n);
    }

    RunData execute() throws InterruptedException {
      List<WorkerTarget> workers = ctx.workers();
      Map<String, WorkerCounters> before = metrics.counters(workers, notes);
      RouterSnapshot routerBefore = snapshot();
      t0 = System.nanoTime();
      lastEndNanos.set(t0);
      long sampleMicros = config.sampleInterval().toNanos() / 1000;
      ScheduledFuture<?> sampler = timer.scheduleAtFixedRate(this::sample, 0, sampleMicros, TimeUnit.MICROSECONDS);
      long firstSend = -1;
      if (requests.stream().anyMatch(r -> r.after() != null || r.answer() != null)) {
        notes.add("through HTTP, conversations run open loop and resend the scripted answers, which the workers did "
            + "not generate: fresh answers in effect (answers=model and loop=closed hold in the virtual A/B only)");
      }
      long maxRunMicros = config.maxRunTime().toNanos() / 1000;
      try {
        for (int i = 0; i < requests.size(); i++) {
          WorkloadRequest r = requests.get(i);
          if (r.arrivalMicros() > maxRunMicros) {
            for (int j = i; j < requests.size(); j++) {
              WorkloadRequest u = requests.get(j);
              records.set(j, RequestRecord.unsent(j, u.id(), u.sessionId(), u.arrivalMicros(), "not_sent"));
            }
            notes.add((requests.size() - i) + " requests not sent: past the run-time cap of " + config.maxRunTime());
            break;
          }
          HttpRequest req = build(r);
          parkUntil(t0 + r.arrivalMicros() * 1000);
          if (!permits.tryAcquire()) {
            records.set(i, RequestRecord.unsent(i, r.id(), r.sessionId(), r.arrivalMicros(), "overflow"));
            continue;
          }
          maxInFlight.accumulateAndGet(inFlight.incrementAndGet(), Math::max);
          long sent = System.nanoTime();
          if (firstSend < 0) {
            firstSend = sent;
          }
          send(i, r, req, sent);
        }
        drain();
      } finally {
        sampler.cancel(false);
      }
      long end = lastEndNanos.get();
      Map<String, WorkerCounters> after = metrics.counters(workers, notes);
      RouterSnapshot routerAfter = snapshot();
      Map<String, WorkerCounters> delta = new LinkedHashMap<>();
      for (WorkerTarget w : workers) {
        delta.put(w.name(), after.getOrDefault(w.name(), WorkerCounters.ABSENT)
            .minus(before.getOrDefault(w.name(), WorkerCounters.ABSENT)));
      }
      List<RequestRecord> out = new ArrayList<>(requests.size());
      for (int i = 0; i < requests.size(); i++) {
        RequestRecord rec = records.get(i);
        WorkloadRequest r = requests.get(i);
        // every send ends in finished(); this only guards against a path that would lose a record
        out.add(rec != null ? rec : RequestRecord.unsent(i, r.id(), r.sessionId(), r.arrivalMicros(), "aborted"));
      }
      RoutingOverhead overhead = ctx.routingOverhead() == null ? null : ctx.routingOverhead().apply(out);
      List<LoadSample> samples;
      synchronized (load) {
        samples = new ArrayList<>(load);
      }
      samples.sort(java.util.Comparator.comparingLong(LoadSample::atMicros));
      long duration = firstSend < 0 ? 0 : (end - firstSend) / 1000;
      List<String> n;
      synchronized (notes) {
        n = new ArrayList<>(notes);
      }
      return new RunData(ctx.policy(), workers.stream().map(WorkerTarget::name).toList(), out, itl, duration, delta,
          samples, sampleMicros, routerBefore, routerAfter, peakHeap.get(), overhead, maxInFlight.get(), n);
    }

    private HttpRequest build(WorkloadRequest r) {
      HttpRequest.Builder b = HttpRequest.newBuilder(endpoint(RequestBodies.path(r)))
          .timeout(config.requestTimeout())
          .header("content-type", "application/json")
          .header("accept", "text/event-stream")
          .POST(HttpRequest.BodyPublishers.ofByteArray(RequestBodies.body(workload, r, config.model())));
      config.headers().forEach(b::header);
      ctx.headers().forEach(b::header);
      return b.build();
    }

    private void send(int i, WorkloadRequest r, HttpRequest req, long sentNanos) {
      StreamingExchange ex = new StreamingExchange(r, t0, sentNanos, itl, this::finished, System::nanoTime);
      live.add(ex);
      java.util.concurrent.CompletableFuture<?> f;
      try {
        f = http.sendAsync(req, ex);
      } catch (RuntimeException e) { // e.g. the client refused the request outright
        ex.fail(e);
        return;
      }
      f.whenComplete((resp, err) -> {
        if (err != null) {
          ex.fail(err);
        }
      });
      ScheduledFuture<?> t = timer.schedule(ex::timeout, config.requestTimeout().toNanos(), TimeUnit.NANOSECONDS);
      ex.attach(f, t);
    }

    /** Called once per sent request, on whichever thread finished it. */
    private void finished(StreamingExchange ex) {
      RequestRecord rec = ex.record();
      records.set(rec.index(), rec);
      if (live.remove(ex)) {
        inFlight.decrementAndGet();
        permits.release();
      }
      lastEndNanos.accumulateAndGet(System.nanoTime(), Math::max);
      if (rec.error() != null && errorNotes.size() < MAX_ERROR_NOTES) {
        String detail = rec.error() + (ex.errorDetail() == null || ex.errorDetail().isEmpty() ? ""
            : ": " + ex.errorDetail());
        if (errorNotes.putIfAbsent(detail, Boolean.TRUE) == null) {
          notes.add("request failure seen: " + detail);
        }
      }
    }

    private void drain() throws InterruptedException {
      long deadline = System.nanoTime() + config.drainTimeout().toNanos();
      while (!live.isEmpty() && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      if (!live.isEmpty()) {
        notes.add(live.size() + " requests still in flight after the drain timeout of " + config.drainTimeout()
            + ": aborted");
        for (StreamingExchange ex : List.copyOf(live)) {
          ex.abort("aborted");
        }
      }
    }

    /** On the timer thread: one scrape per worker per tick, skipped while the previous one is outstanding. */
    private void sample() {
      try {
        sampleOnce();
      } catch (RuntimeException e) { // a periodic task that throws is never run again
        log.warn("load sample failed: {}", e.toString());
      }
    }

    private void sampleOnce() {
      long at = (System.nanoTime() - t0) / 1000;
      for (WorkerTarget w : ctx.workers()) {
        if (!scraping.add(w.name())) {
          continue;
        }
        metrics.scrape(w).whenComplete((s, err) -> {
          scraping.remove(w.name());
          if (s != null && load.size() < MAX_LOAD_SAMPLES) {
            load.add(new LoadSample(at, w.name(), s.getOrDefault(WorkerMetrics.RUNNING, 0.0),
                s.getOrDefault(WorkerMetrics.WAITING, 0.0)));
          }
        });
      }
      RouterSnapshot s = snapshot();
      if (s != null && s.heapUsedBytes() >= 0) {
        peakHeap.accumulateAndGet(s.heapUsedBytes(), Math::max);
      }
    }

    private RouterSnapshot snapshot() {
      if (ctx.routerSnapshot() == null) {
        return null;
      }
      try {
        return ctx.routerSnapshot().get();
      } catch (RuntimeException e) {
        log.warn("router snapshot failed: {}", e.toString());
        return null;
      }
    }
  }

  private URI endpoint(String path) {
    String base = config.target().toString().replaceAll("/+$", "");
    return URI.create(base + path);
  }

  /** Parks until {@code System.nanoTime() >= deadline}; the last stretch spins briefly for accuracy. */
  static void parkUntil(long deadline) throws InterruptedException {
    while (true) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return;
      }
      if (Thread.interrupted()) {
        throw new InterruptedException();
      }
      if (left > 200_000) {
        LockSupport.parkNanos(left - 100_000);
      } else {
        Thread.onSpinWait();
      }
    }
  }

  private ThreadFactory threads(String prefix) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, prefix + "-" + n.incrementAndGet());
      t.setDaemon(true);
      threadsCreated.incrementAndGet();
      return t;
    };
  }

  @Override
  public void close() {
    timer.shutdownNow();
    clientExecutor.shutdownNow();
  }
}
