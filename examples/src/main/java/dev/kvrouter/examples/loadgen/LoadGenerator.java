package dev.kvrouter.examples.loadgen;

import dev.kvrouter.examples.report.LatencyStats;
import dev.kvrouter.examples.report.LoadSample;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.report.RouterSnapshot;
import dev.kvrouter.examples.report.RoutingOverhead;
import dev.kvrouter.examples.report.RunData;
import dev.kvrouter.examples.report.Sessions;
import dev.kvrouter.examples.report.WorkerCounters;
import dev.kvrouter.examples.workload.AgentAnswer;
import dev.kvrouter.examples.workload.ChatText;
import dev.kvrouter.examples.workload.Prompt;
import dev.kvrouter.examples.workload.Segment;
import dev.kvrouter.examples.workload.SessionChain;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.LockSupport;
import org.HdrHistogram.Histogram;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The HTTP driver: sends each request of a workload at its arrival time, whatever the state of earlier ones (open
 * loop), as a streaming OpenAI request, and records what came back ({@link RequestRecord}), the workers' counters
 * before and after, and their queues every {@code sampleInterval}.
 *
 * <p>Conversations run closed loop: a request that waits for another ({@link WorkloadRequest#after}, the previous
 * turn of its session) is sent at its arrival time or when that one completed or failed, whichever is later, as
 * vLLM's multi-turn benchmark client does; open loop across sessions and for every other request. A request that
 * scripts its answer ({@link WorkloadRequest#answer}) carries the answer's seed as the OpenAI {@code seed}, which
 * workers started with {@code --output-tokens workload} turn into exactly the scripted tokens, so a later turn
 * resends the model's own answer; a chat request's seed names a scripted chat answer, whose text the worker streams
 * and the next turn resends as the assistant message. A later prompt resends what the client received: an earlier
 * answer that came back short is cut to the tokens streamed, a chat answer to the whole words streamed (none for a
 * failed or unsent turn; {@link Prompt#withAnswersCut}), as the virtual-time A/B ({@code ab.VirtualRun}) does.
 * The run's notes count the held-back turns, their total and longest hold, the answers resent short, and how many
 * streamed answers matched the script (a worker that picks its own tokens makes the resent answers fresh in effect,
 * and the notes say so); the same figures, structured, are the run's {@link Sessions} ({@link RunData#sessions},
 * report.json's {@code sessions} per policy).
 *
 * <p>Threads, all fixed whatever the request count: the caller's thread (the send thread) schedules and makes every
 * send (it builds the next body, then waits until its arrival time); the HTTP client's selector thread and
 * {@code clientThreads} executor threads read responses; one timer thread samples worker queues and fires request
 * timeouts. Requests in flight are capped by a semaphore; an arrival that finds it exhausted is recorded as
 * {@code overflow} rather than delayed, so a saturated target shows up as errors, not as a silently slower arrival
 * rate (an overflowed turn counts as failed for its successor).
 *
 * <p>Closed-loop contract: the send thread alone sends, holds and counts holds. A completion (on an HTTP client or
 * timer thread, or the send thread for a request never sent) first records what the client received of a scripted
 * answer, then marks the waiting request's edge done; if the send thread had already marked it held, the
 * completion hands its index to the send thread over a queue, and the send thread, which waits on that queue
 * instead of parking whenever the workload has dependent requests, sends it. One compare-and-set per edge decides
 * who came first, so a turn is sent exactly once and never before its predecessor completed; the queue hand-off
 * orders the received-answer write before the send that reads it.
 *
 * <p>One run at a time per instance; {@link #close()} stops the threads.
 */
public final class LoadGenerator implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(LoadGenerator.class);
  /** Distinct failure details kept as notes per run. */
  private static final int MAX_ERROR_NOTES = 8;
  /** Closed loop, per waiting request: neither its due time nor its predecessor's completion has come. */
  private static final int EDGE_OPEN = 0;
  /** Its due time came first: the completion releases it. */
  private static final int EDGE_HELD = 1;
  /** Its predecessor completed first: it is sent when due. */
  private static final int EDGE_DONE = 2;
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
    // Closed loop (see the class comment). The chain's edges are fixed before the first send; its hold counts are
    // the send thread's.
    private final SessionChain chain;
    private final AtomicIntegerArray edge;
    /** Per request: when it completed, failed or was given up (nanoTime), written before its successor's edge. */
    private final AtomicLongArray doneNanos;
    private final LinkedBlockingQueue<Integer> released = new LinkedBlockingQueue<>();
    /** Scripted answers that came back short (seed to tokens received); written before the edge is marked done. */
    private final Map<Long, Integer> receivedShort = new ConcurrentHashMap<>();
    private final AtomicInteger answersAsScripted = new AtomicInteger();
    private final AtomicInteger answersOffScript = new AtomicInteger();
    private final AtomicInteger answersUnread = new AtomicInteger();
    // Send thread only.
    private final boolean[] held;
    private int heldNow;

    Run(Workload workload, RunContext ctx) {
      this.workload = workload;
      this.ctx = ctx;
      // the cap keeps whole sibling groups: part of a best-of-N group would send siblings that are not there
      int n = config.maxRequests() > 0 ? workload.wholeGroups(config.maxRequests()) : workload.size();
      this.requests = workload.requests().subList(0, n);
      this.records = new AtomicReferenceArray<>(n);
      this.chain = new SessionChain(requests);
      this.edge = new AtomicIntegerArray(n);
      this.doneNanos = new AtomicLongArray(n);
      this.held = new boolean[n];
    }

    RunData execute() throws InterruptedException {
      List<WorkerTarget> workers = ctx.workers();
      Map<String, WorkerCounters> before = metrics.counters(workers, notes);
      RouterSnapshot routerBefore = snapshot();
      t0 = System.nanoTime();
      lastEndNanos.set(t0);
      long sampleMicros = config.sampleInterval().toNanos() / 1000;
      ScheduledFuture<?> sampler = timer.scheduleAtFixedRate(this::sample, 0, sampleMicros, TimeUnit.MICROSECONDS);
      List<ScheduledFuture<?>> actions = new ArrayList<>();
      for (RunContext.TimedAction a : ctx.actions()) {
        actions.add(timer.schedule(() -> act(a), a.at().toNanos(), TimeUnit.NANOSECONDS));
      }
      long maxRunNanos = config.maxRunTime().toNanos();
      try {
        sendAll(maxRunNanos);
        drain();
      } finally {
        sampler.cancel(false);
        // an action due after the last response is not part of this run
        actions.forEach(f -> f.cancel(false));
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
      Sessions sessions = sessions();
      closedLoopNotes(sessions);
      List<String> n;
      synchronized (notes) {
        n = new ArrayList<>(notes);
      }
      return new RunData(ctx.policy(), workers.stream().map(WorkerTarget::name).toList(), out, itl, duration, delta,
          samples, sampleMicros, routerBefore, routerAfter, peakHeap.get(), overhead, maxInFlight.get(), n, sessions);
    }


    private long firstSend = -1;

    /** On the timer thread. */
    private void act(RunContext.TimedAction a) {
      try {
        a.action().run();
        notes.add(String.format(Locale.ROOT, "%s at %.3f s", a.label(), (System.nanoTime() - t0) / 1e9));
      } catch (RuntimeException e) {
        notes.add(a.label() + " failed: " + e);
      }
    }

    /**
     * The send thread's loop: every request in arrival order at its due time, and in between every held turn the
     * moment its predecessor completes. Bounded: each iteration either passes one planned request or sends one held
     * turn (each at most once), and waiting for held turns once every planned request is past gives up when none
     * is released for the request timeout plus the drain timeout.
     */
    private void sendAll(long maxRunNanos) throws InterruptedException {
      boolean closed = chain.dependentTurns() > 0;
      int n = requests.size();
      int next = 0;
      while (next < n) {
        WorkloadRequest r = requests.get(next);
        if (r.arrivalMicros() * 1000 > maxRunNanos) {
          for (int j = next; j < n; j++) {
            WorkloadRequest u = requests.get(j);
            records.set(j, RequestRecord.unsent(j, u.id(), u.sessionId(), u.arrivalMicros(), "not_sent"));
          }
          notes.add((n - next) + " requests not sent: past the run-time cap of " + config.maxRunTime());
          break; // the successors of these are among them: nothing to release
        }
        int p = chain.predecessor(next);
        // built before waiting when it cannot change any more: no predecessor, or its answer is in
        HttpRequest req = p < 0 || edge.get(next) == EDGE_DONE ? build(r, cutPrompt(r)) : null;
        long due = t0 + r.arrivalMicros() * 1000;
        if (closed) {
          Integer ready;
          while ((ready = releasedUntil(due)) != null) {
            sendReleased(ready, maxRunNanos);
          }
        } else {
          parkUntil(due);
        }
        if (p >= 0 && edge.compareAndSet(next, EDGE_OPEN, EDGE_HELD)) {
          held[next] = true;
          heldNow++;
        } else {
          send(next, r, req != null ? req : build(r, cutPrompt(r)), r.arrivalMicros());
        }
        next++;
      }
      // Every held turn's predecessor is in flight (it ends by its timeout) or itself held; a turn is released at
      // most once, and one released past the run-time cap is not sent, so this ends by the cap plus a timeout.
      long patience = config.requestTimeout().toNanos() + config.drainTimeout().toNanos();
      while (heldNow > 0) {
        Integer ready = released.poll(patience, TimeUnit.NANOSECONDS);
        if (ready == null) {
          break;
        }
        sendReleased(ready, maxRunNanos);
      }
      if (heldNow > 0) {
        int left = 0;
        for (int i = 0; i < n; i++) {
          if (held[i] && records.get(i) == null && edge.get(i) == EDGE_HELD) {
            WorkloadRequest u = requests.get(i);
            records.set(i, RequestRecord.unsent(i, u.id(), u.sessionId(), u.arrivalMicros(), "aborted"));
            left++;
          }
        }
        notes.add(left + " turns still waiting for their previous turn when none was released for the request and "
            + "drain timeouts: aborted");
      }
    }

    /** A released turn, as soon as one is, or null once {@code deadline} (nanoTime) has come. */
    private Integer releasedUntil(long deadline) throws InterruptedException {
      Integer r = released.poll();
      if (r != null) {
        return r;
      }
      long left = deadline - System.nanoTime();
      if (left > 200_000) {
        r = released.poll(left - 100_000, TimeUnit.NANOSECONDS);
        if (r != null) {
          return r;
        }
      }
      parkUntil(deadline); // the last stretch spins for accuracy, as in open loop
      return null;
    }

    /**
     * Sends held turn {@code i} now that its predecessor completed (send thread). Its hold runs from its planned
     * time to that completion, as in the virtual A/B; the rest (completion to send) is the driver's send lag.
     */
    private void sendReleased(int i, long maxRunNanos) {
      heldNow--;
      WorkloadRequest r = requests.get(i);
      long planned = t0 + r.arrivalMicros() * 1000;
      long due = Math.max(planned, doneNanos.get(chain.predecessor(i)));
      chain.held(due - planned);
      if (due - t0 > maxRunNanos) {
        records.set(i, RequestRecord.unsent(i, r.id(), r.sessionId(), (due - t0) / 1000, "not_sent"));
        answered(i, 0);
        return;
      }
      send(i, r, build(r, cutPrompt(r)), (due - t0) / 1000);
    }

    /**
     * The prompt as the client resends it: earlier answers cut to what it received of them (tokens; for chat, the
     * whole words).
     */
    private Prompt cutPrompt(WorkloadRequest r) {
      return r.prompt().withAnswersCut(receivedShort);
    }

    /**
     * Request {@code i} completed, failed or was never sent, the client having received {@code tokens} of its
     * answer (for a chat answer, its whole words): records a short scripted answer, then releases the turn waiting
     * for it. Any thread.
     */
    private void answered(int i, int tokens) {
      answered(i, tokens, false);
    }

    /** As {@link #answered(int, int)}; {@code call}: a coding agent's answer arrived with its tool call. */
    private void answered(int i, int tokens, boolean call) {
      doneNanos.set(i, System.nanoTime());
      WorkloadRequest r = requests.get(i);
      int s = chain.successor(i);
      if (s >= 0 && r.answer() != null && r.prompt().format() == Prompt.Format.MESSAGES) {
        AgentAnswer.of(r.answer(), workload.agentReasoning()).received(tokens, call, receivedShort);
      } else if (s >= 0 && r.reasoning() > 0) {
        AgentAnswer.chatReceived(r.answer(), r.reasoning(), tokens, receivedShort);
      } else if (s >= 0 && r.answer() != null && tokens < r.answer().length()) { // a last answer is never resent
        receivedShort.put(r.answer().seed(), Math.max(0, tokens));
      }
      if (s >= 0 && edge.getAndSet(s, EDGE_DONE) == EDGE_HELD) {
        released.add(s);
      }
    }

    /**
     * The closed loop's figures for the report, null for an open-loop run (send thread, after the drain: every
     * completion has recorded what it received).
     */
    private Sessions sessions() {
      if (chain.dependentTurns() == 0) {
        return null;
      }
      long empty = receivedShort.values().stream().filter(t -> t == 0).count();
      return Sessions.of(chain, workload.scriptsAnswers(), receivedShort.size(), empty,
          workload.scriptsAnswers() ? new Sessions.StreamedAnswers(answersAsScripted.get(), answersOffScript.get(),
              answersUnread.get()) : null);
    }

    private void closedLoopNotes(Sessions sessions) {
      if (chain.dependentTurns() > 0) {
        notes.add(sessions.summary());
      }
      int scripted = answersAsScripted.get() + answersOffScript.get() + answersUnread.get();
      if (scripted > 0) {
        String what = workload.chatPrompts() ? "text" : "tokens";
        if (answersOffScript.get() + answersUnread.get() == 0) {
          notes.add("model answers: all " + scripted + " streamed answers were the scripted " + what);
        } else {
          notes.add(String.format(java.util.Locale.ROOT, "model answers: %d of %d streamed answers were the scripted "
              + "%s, %d were other %s, %d not token ids (workers not started with --output-tokens "
              + "workload?); later turns resend the script, so those answers are fresh in effect",
              answersAsScripted.get(), scripted, what, answersOffScript.get(), what, answersUnread.get()));
        }
      }
    }

    private HttpRequest build(WorkloadRequest r, Prompt prompt) {
      HttpRequest.Builder b = HttpRequest.newBuilder(endpoint(RequestBodies.path(r)))
          .timeout(config.requestTimeout())
          .header("content-type", "application/json")
          .header("accept", "text/event-stream")
          .POST(HttpRequest.BodyPublishers.ofByteArray(RequestBodies.body(workload, r, prompt, config.model())));
      config.headers().forEach(b::header);
      ctx.headers().forEach(b::header);
      return b.build();
    }

    /** Sends request {@code i} now, or records it as {@code overflow} at the in-flight cap (send thread). */
    private void send(int i, WorkloadRequest r, HttpRequest req, long dueMicros) {
      if (!permits.tryAcquire()) {
        records.set(i, RequestRecord.unsent(i, r.id(), r.sessionId(), dueMicros, "overflow"));
        answered(i, 0);
        return;
      }
      maxInFlight.accumulateAndGet(inFlight.incrementAndGet(), Math::max);
      long sentNanos = System.nanoTime();
      if (firstSend < 0) {
        firstSend = sentNanos;
      }
      StreamingExchange ex = new StreamingExchange(r, dueMicros, t0, sentNanos, itl, this::finished, System::nanoTime);
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
      WorkloadRequest r = ex.request();
      int received = rec.ok() && rec.completionTokens() >= 0 ? rec.completionTokens() : rec.contentChunks();
      String text = r.answer() == null ? null : ex.streamedAnswerText();
      boolean agent = r.answer() != null && r.prompt().format() == Prompt.Format.MESSAGES;
      if (agent && text != null) {
        // the text block ends with the separator the template writes before the calls (vLLM's hermes parser keeps
        // all before <tool_call>); the history resends the words without it, so the next turn renders as generated
        text = text.stripTrailing();
      }
      // a coding agent's answer: its text is the answer's first words, and its call arrives whole or not at all
      Segment scripted = agent ? AgentAnswer.of(r.answer()).text() : r.answer();
      boolean call = false;
      if (text != null) {
        // a chat answer: the client resends the whole words it received, or the script when it got other text
        int words = ChatText.wordsHeld(text, scripted, workload.tokenSpace());
        call = agent && (words < 0 ? rec.ok() : ex.toolCallReceived());
        if (rec.contentChunks() > 0) {
          (words < 0 ? answersOffScript : answersAsScripted).incrementAndGet();
        }
        received = words >= 0 ? words : rec.ok() ? scripted.length() : 0;
      } else if (r.answer() != null && rec.contentChunks() > 0) {
        int[] streamed = ex.streamedAnswer();
        if (streamed == null) {
          answersUnread.incrementAndGet();
        } else if (Arrays.equals(streamed, workload.tokenSpace().tokens(
            new Segment(r.answer().seed(), streamed.length)))) {
          answersAsScripted.incrementAndGet();
        } else {
          answersOffScript.incrementAndGet();
        }
      }
      answered(rec.index(), received, call);
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
