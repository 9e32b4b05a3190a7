package dev.kvrouter.examples.sim.engine;

import dev.kvrouter.examples.sim.clock.SimClock;
import dev.kvrouter.examples.sim.events.KvEventSink;
import dev.kvrouter.examples.sim.timing.StepWork;
import dev.kvrouter.examples.sim.timing.TimingModel;
import dev.kvrouter.index.wire.AllBlocksCleared;
import dev.kvrouter.index.wire.EventBatch;
import dev.kvrouter.index.wire.KvEvent;
import java.security.SecureRandom;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A simulated vLLM engine process driven by a {@link SimClock}: the engine loop (schedule a step, let it take
 * the time the timing model says, apply its outputs, publish its KV events, repeat while there is work), plus
 * the process lifecycle (crash, restart) and a slowdown knob.
 *
 * <p>The same object runs in real time behind an HTTP server (a {@code RealTimeClock} thread) and in virtual
 * time inside a discrete-event replay (a {@code VirtualClock}), so both modes exercise the same worker model.
 *
 * <p>Concurrency: all state is owned by the clock's thread. Public methods may be called from any thread; they
 * hand their work to the clock with {@link SimClock#execute}. Methods ending in {@code Now} must be called on
 * the owner thread (in virtual time, from inside a clock task or between runs of the loop).
 */
public final class SimEngine {

  private static final Logger log = LoggerFactory.getLogger(SimEngine.class);

  private final String name;
  private final EngineConfig config;
  private final SimClock clock;
  private final TimingModel timing;
  private final KvEventSink sink;
  private final OutputTokens outputs;
  private final Counters counters = new Counters();
  private final SecureRandom random = new SecureRandom();

  private EngineCore core;
  private long lifetime;
  private boolean stepInFlight;
  /** When the pending wake-up for offload copies fires, or Long.MAX_VALUE. */
  private long wakeAt = Long.MAX_VALUE;
  private double slowdown = 1.0;
  private volatile boolean up = true;

  public SimEngine(String name, EngineConfig config, SimClock clock, TimingModel timing, KvEventSink sink,
      OutputTokens outputs) {
    this.name = Objects.requireNonNull(name, "name");
    this.config = Objects.requireNonNull(config, "config");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.timing = Objects.requireNonNull(timing, "timing");
    this.sink = Objects.requireNonNull(sink, "sink");
    this.outputs = Objects.requireNonNull(outputs, "outputs");
    this.core = newCore();
  }

  public String name() {
    return name;
  }

  public EngineConfig config() {
    return config;
  }

  public SimClock clock() {
    return clock;
  }

  /** Whether the engine process is up (not crashed); readable from any thread. */
  public boolean isUp() {
    return up;
  }

  /** Why {@code spec} can never run here, or {@code null}; pure and thread-safe. */
  public String validate(RequestSpec spec) {
    return EngineCore.validate(config, spec);
  }

  /** Hands a request to the engine; the observer hears about it on the engine thread. */
  public void submit(RequestSpec spec, RequestObserver observer) {
    clock.execute(() -> submitNow(spec, observer));
  }

  /** {@link #submit} on the owner thread. */
  public void submitNow(RequestSpec spec, RequestObserver observer) {
    if (!up) {
      try {
        observer.onFailed(new RequestFailure(spec.id(), RequestFailure.Kind.UNAVAILABLE,
            "The engine is restarting."));
      } catch (RuntimeException e) {
        log.warn("request observer failed", e);
      }
      counters.failedRequests++;
      return;
    }
    if (core.add(spec, observer, clock.nanoTime())) {
      kick();
    }
  }

  /** Cancels a request (client went away). */
  public void abort(String requestId) {
    clock.execute(() -> {
      if (up) {
        core.abort(requestId);
      }
    });
  }

  /** Multiplies every step's duration by {@code factor} from the next step on (1 = nominal). */
  public void setSlowdown(double factor) {
    if (!(factor > 0) || Double.isInfinite(factor)) {
      throw new IllegalArgumentException("slowdown must be a positive finite number, was " + factor);
    }
    clock.execute(() -> slowdown = factor);
  }

  /**
   * Kills the engine process: every in-flight request fails, the KV cache and the event publisher are gone;
   * after {@code downNanos} a new process starts with an empty cache, a new engine-hash seed and a new event
   * publisher lifetime (sequence numbers from 0), and announces itself with {@code AllBlocksCleared}.
   */
  public void crash(long downNanos) {
    if (downNanos < 0) {
      throw new IllegalArgumentException("downNanos must be >= 0");
    }
    clock.execute(() -> crashNow(downNanos));
  }

  /** {@link #crash} on the owner thread. */
  public void crashNow(long downNanos) {
    if (!up) {
      return;
    }
    up = false;
    lifetime++;
    stepInFlight = false;
    wakeAt = Long.MAX_VALUE;
    counters.evictionsBeforeRestart += core.evictions();
    counters.cpuEvictionsBeforeRestart += core.cpuEvictions();
    core.failAll(RequestFailure.Kind.ENGINE_DEAD, "The engine process died.");
    core = null;
    try {
      sink.crashed();
    } catch (RuntimeException e) {
      log.warn("event sink failed on crash of {}", name, e);
    }
    log.info("engine {} crashed; restarting in {} ms", name, downNanos / 1_000_000);
    clock.schedule(clock.nanoTime() + downNanos, this::restartNow);
  }

  private void restartNow() {
    counters.restarts++;
    core = newCore();
    try {
      sink.restart();
    } catch (RuntimeException e) {
      log.warn("event sink failed on restart of {}", name, e);
    }
    publish(List.of(AllBlocksCleared.INSTANCE));
    up = true;
    log.info("engine {} restarted", name);
  }

  /** vLLM's {@code reset_prefix_cache}; completes with false if requests still hold blocks or it is down. */
  public CompletableFuture<Boolean> resetPrefixCache() {
    CompletableFuture<Boolean> f = new CompletableFuture<>();
    clock.execute(() -> {
      boolean ok = up && core.resetPrefixCache();
      if (ok && !stepInFlight) {
        publishPending();
      }
      f.complete(ok);
    });
    return f;
  }

  /** A consistent snapshot of the counters, taken on the owner thread. */
  public CompletableFuture<EngineStats> stats() {
    CompletableFuture<EngineStats> f = new CompletableFuture<>();
    clock.execute(() -> f.complete(statsNow()));
    return f;
  }

  /** {@link #stats()} on the owner thread. */
  public EngineStats statsNow() {
    if (core != null) {
      return core.stats(counters);
    }
    Counters c = counters;
    return new EngineStats(0, 0, 0.0, config.numGpuBlocks(), 0, c.prefixQueryTokens, c.prefixHitTokens,
        c.promptTokens, c.cachedPromptTokens, c.prefillTokensComputed, c.generationTokens, c.finishedRequests,
        c.failedRequests, c.preemptions, c.evictionsBeforeRestart, c.steps, c.busyNanos, c.restarts,
        c.ttft.snapshot(), c.e2e.snapshot(), c.itl.snapshot(), EngineCore.offloadStats(c, config, 0, 0),
        EngineStats.Media.of(c), c.firstTokenLateNanos);
  }

  /** Whether the engine has requests waiting or running; owner thread. */
  public boolean hasWorkNow() {
    return core != null && core.hasWork();
  }

  /** Requests in the running set; owner thread. Cheaper than {@link #statsNow} for frequent sampling. */
  public int runningNow() {
    return core == null ? 0 : core.numRunning();
  }

  /** Requests waiting (new or preempted); owner thread. */
  public int waitingNow() {
    return core == null ? 0 : core.numWaiting();
  }

  /** Fraction of usable KV blocks referenced by requests ({@code vllm:kv_cache_usage_perc}); owner thread. */
  public double kvUsageNow() {
    return core == null ? 0.0 : core.kvUsage();
  }

  /**
   * How many of {@code identities[0..n)} (a prompt's chained block identities, from block 0) this engine's GPU
   * cache holds as a leading run right now: the prefix a request would hit if admitted now. For measurement (the
   * A/B's miss breakdown), owner thread; 0 while crashed.
   */
  public int cachedLeadNow(long[] identities, int n) {
    return core == null ? 0 : core.cachedLead(identities, n);
  }

  /** Feeds the identity of every block cached on GPU (duplicates within the engine included); owner thread. */
  public void forEachCachedIdentityNow(java.util.function.LongConsumer sink) {
    if (core != null) {
      core.forEachCachedIdentity(sink);
    }
  }

  /** Running plus waiting requests; owner thread. */
  public int loadNow() {
    return core == null ? 0 : core.numRunning() + core.numWaiting();
  }

  /** The live core (null while crashed); tests on the owner thread only. */
  EngineCore coreForTests() {
    return core;
  }

  private EngineCore newCore() {
    long seed = config.seed() != 0 ? mix(config.seed() + lifetime * 0x9E3779B97F4A7C15L) : random.nextLong();
    return new EngineCore(config, seed, outputs, counters, timing);
  }

  private void kick() {
    if (!stepInFlight && up && core.hasWork()) {
      startStep(clock.nanoTime());
    }
  }

  private void startStep(long start) {
    ScheduledStep step = core.schedule(start);
    if (step.isEmpty() && core.hasWork()) {
      // Everything running was preempted in that call; the next one admits from the waiting queue.
      step = core.schedule(start);
      if (step.isEmpty() && core.hasWork() && !core.hasPendingTransfers()) {
        int failed = core.failWaiting("The request cannot be scheduled on this engine.");
        log.error("engine {} could not schedule any work; failed {} waiting requests", name, failed);
      }
    }
    if (step.isEmpty()) {
      publishPending();
      armWake();
      return;
    }
    StepWork work = step.work();
    long duration = (long) Math.ceil(timing.stepNanos(work) * slowdown);
    long end = start + Math.max(1, duration);
    long myLifetime = lifetime;
    ScheduledStep s = step;
    stepInFlight = true;
    clock.schedule(end, () -> finishStep(s, end - start, end, myLifetime));
  }

  private void finishStep(ScheduledStep step, long duration, long end, long stepLifetime) {
    if (stepLifetime != lifetime) {
      return; // the process that ran this step crashed meanwhile
    }
    stepInFlight = false;
    long late = Math.max(0, clock.nanoTime() - end); // before applying it: the step's own CPU is not lateness
    long firstTokens = counters.ttft.count();
    core.complete(step, duration, end);
    counters.firstTokenLateNanos += (counters.ttft.count() - firstTokens) * late;
    publishPending();
    if (core.hasWork()) {
      startStep(end);
    } else {
      armWake();
    }
  }

  /**
   * With no step running and offload copies in flight, wakes the engine when the first ends (vLLM's engine loop
   * keeps polling the connector while requests wait for their KV).
   */
  private void armWake() {
    if (stepInFlight || !core.hasPendingTransfers()) {
      return;
    }
    long at = Math.max(core.nextTransferNanos(), clock.nanoTime());
    if (at == Long.MAX_VALUE || at >= wakeAt) {
      return;
    }
    wakeAt = at;
    long myLifetime = lifetime;
    clock.schedule(at, () -> {
      if (myLifetime != lifetime || wakeAt != at) {
        return;
      }
      wakeAt = Long.MAX_VALUE;
      if (stepInFlight) {
        return; // the step's end polls
      }
      core.pollTransfers(at);
      publishPending();
      if (core.hasWork()) {
        startStep(at);
      } else {
        armWake();
      }
    });
  }

  private void publishPending() {
    List<KvEvent> events = core.takeEvents();
    if (!events.isEmpty()) {
      publish(events);
    }
  }

  private void publish(List<KvEvent> events) {
    try {
      sink.publish(EventBatch.of(clock.epochSeconds(), config.dpRank(), events));
    } catch (RuntimeException e) {
      log.warn("event sink of {} failed; events of this step are lost", name, e);
    }
  }

  private static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }
}
