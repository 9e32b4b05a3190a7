package dev.kvrouter.examples.sim.engine;

import dev.kvrouter.index.wire.KvEvent;
import dev.kvrouter.examples.sim.timing.StepWork;
import dev.kvrouter.index.block.CacheNamespace;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One engine process's scheduler and KV cache: vLLM v1's {@code Scheduler.schedule()} and
 * {@code update_from_output()} with FCFS policy, over a {@link KvCacheManager}.
 *
 * <p>Each step first gives tokens to the running requests in admission order (a decoding request needs one
 * token, a request part-way through a chunked prefill needs the rest of its prompt), capped by the step's token
 * budget; when a running request cannot get blocks, the most recently admitted running request is preempted
 * (its blocks are freed, it will recompute from scratch, finding its own prefix in the cache if not yet
 * evicted). Then, if nobody was preempted, waiting requests are admitted in order while there is budget, a
 * free running slot and enough blocks, each starting from its cached prefix and taking as much of its prompt as
 * the remaining budget allows (chunked prefill). Because requests are admitted in arrival order and a prefill
 * only stays unfinished when it exhausted the budget, running decodes come before the prefill chunk in practice:
 * decode first, then prefill chunks, as vLLM.
 *
 * <p>Time is not here: {@link SimEngine} asks for a step, lets the timing model decide how long it takes, and
 * completes it at the clock time it ends. Single-threaded: every method runs on the engine's owner thread.
 */
public final class EngineCore {

  private static final Logger log = LoggerFactory.getLogger(EngineCore.class);
  private static final int[] NO_HITS = new int[0];

  private final EngineConfig config;
  private final KvBlockPool pool;
  private final KvCacheManager cache;
  private final OutputTokens outputs;
  private final Counters counters;
  private final ArrayDeque<EngineRequest> waiting = new ArrayDeque<>();
  private final ArrayList<EngineRequest> running = new ArrayList<>();
  private final Map<String, EngineRequest> live = new HashMap<>();
  private final Map<String, Long> roots = new HashMap<>();

  EngineCore(EngineConfig config, long engineHashSeed, OutputTokens outputs, Counters counters) {
    this.config = config;
    this.pool = new KvBlockPool(config.numGpuBlocks(), engineHashSeed, true);
    this.cache = new KvCacheManager(pool, config.blockSize(), config.maxModelLen(), config.enablePrefixCaching());
    this.outputs = outputs;
    this.counters = counters;
  }

  /** A standalone core with its own counters (tests, benchmarks). */
  public static EngineCore create(EngineConfig config, long engineHashSeed, OutputTokens outputs) {
    return new EngineCore(config, engineHashSeed, outputs, new Counters());
  }

  public EngineConfig config() {
    return config;
  }

  /**
   * Why {@code spec} can never run on an engine with {@code config}, or {@code null} if it can. Pure; the API
   * layer calls it before answering so that a bad request gets a 400, not a failed stream.
   */
  public static String validate(EngineConfig config, RequestSpec spec) {
    int prompt = spec.promptTokens().length;
    if (prompt == 0) {
      return "The prompt is empty.";
    }
    if (spec.maxTokens() < 1) {
      return "max_tokens must be at least 1, got " + spec.maxTokens() + ".";
    }
    long total = (long) prompt + spec.maxTokens();
    if (total > config.maxModelLen()) {
      return "This model's maximum context length is " + config.maxModelLen() + " tokens. However, you requested "
          + total + " tokens (" + prompt + " in the messages, " + spec.maxTokens() + " in the completion).";
    }
    long blocks = (total + config.blockSize() - 1) / config.blockSize();
    if (blocks > config.usableBlocks()) {
      return "The request needs " + blocks + " KV blocks but the engine has only " + config.usableBlocks() + ".";
    }
    if (spec.adapter() != null && !config.adapters().contains(spec.adapter())) {
      return "The model `" + spec.adapter() + "` does not exist.";
    }
    if (config.vocabSize() > 0) {
      for (int t : spec.promptTokens()) {
        if (t < 0 || t >= config.vocabSize()) {
          return "Token id " + t + " is out of vocabulary (size " + config.vocabSize() + ").";
        }
      }
    } else {
      for (int t : spec.promptTokens()) {
        if (t < 0) {
          return "Token id " + t + " is negative.";
        }
      }
    }
    return null;
  }

  /**
   * Admits a request to the waiting queue. Failures (invalid, duplicate id, queue full) are reported to the
   * observer and return false.
   */
  public boolean add(RequestSpec spec, RequestObserver observer, long nowNanos) {
    String invalid = validate(config, spec);
    if (invalid == null && live.containsKey(spec.id())) {
      invalid = "A request with id " + spec.id() + " is already running.";
    }
    if (invalid != null) {
      fail(observer, new RequestFailure(spec.id(), RequestFailure.Kind.INVALID, invalid));
      return false;
    }
    if (waiting.size() >= config.maxWaitingRequests()) {
      fail(observer, new RequestFailure(spec.id(), RequestFailure.Kind.OVERLOADED,
          "The server is overloaded: " + waiting.size() + " requests are waiting."));
      return false;
    }
    EngineRequest r = new EngineRequest(spec, rootSeed(spec), config.blockSize(), observer, nowNanos);
    live.put(r.id, r);
    waiting.addLast(r);
    try {
      observer.onAccepted();
    } catch (RuntimeException e) {
      log.warn("request observer failed on acceptance", e);
    }
    return true;
  }

  /** Cancels a live request (client gone); its blocks are freed at once. Returns false if unknown. */
  public boolean abort(String id) {
    EngineRequest r = live.remove(id);
    if (r == null) {
      return false;
    }
    if (r.status == EngineRequest.Status.RUNNING) {
      running.remove(r);
    } else {
      waiting.remove(r);
    }
    cache.free(r);
    r.status = EngineRequest.Status.FINISHED;
    counters.failedRequests++;
    fail(r.observer, new RequestFailure(id, RequestFailure.Kind.ABORTED, "Request aborted."));
    return true;
  }

  /** Fails every live request (the engine died); the core must not be used afterwards. */
  public void failAll(RequestFailure.Kind kind, String message) {
    List<EngineRequest> all = new ArrayList<>(live.values());
    live.clear();
    waiting.clear();
    running.clear();
    for (EngineRequest r : all) {
      r.status = EngineRequest.Status.FINISHED;
      counters.failedRequests++;
      fail(r.observer, new RequestFailure(r.id, kind, message));
    }
  }

  public boolean hasWork() {
    return !waiting.isEmpty() || !running.isEmpty();
  }

  public int numRunning() {
    return running.size();
  }

  public int numWaiting() {
    return waiting.size();
  }

  /** Fraction of usable blocks referenced by requests (vLLM's {@code kv_cache_usage}). */
  public double kvUsage() {
    return pool.usage();
  }

  /** vLLM's {@code reset_prefix_cache}; false if a request still holds blocks. */
  public boolean resetPrefixCache() {
    return pool.resetPrefixCache();
  }

  /** Events produced since the last call (stores and evictions of scheduling, clears). */
  public List<KvEvent> takeEvents() {
    return pool.takeEvents();
  }

  /** Decides the next step. Advances each scheduled request's computed-token count, as vLLM does. */
  public ScheduledStep schedule() {
    int budget = config.maxNumBatchedTokens();
    int cap = running.size() + Math.min(waiting.size(), config.maxNumSeqs());
    EngineRequest[] reqs = new EngineRequest[Math.max(1, cap)];
    int[] tokens = new int[reqs.length];
    int[] before = new int[reqs.length];
    int n = 0;
    int preempted = 0;

    int i = 0;
    while (i < running.size() && budget > 0) {
      EngineRequest r = running.get(i);
      int want = r.numTokens - r.numComputedTokens;
      if (config.longPrefillTokenThreshold() > 0 && want > config.longPrefillTokenThreshold()) {
        want = config.longPrefillTokenThreshold();
      }
      want = Math.min(want, budget);
      want = Math.min(want, config.maxModelLen() - 1 - r.numComputedTokens);
      if (want <= 0) {
        i++;
        continue;
      }
      boolean scheduled = false;
      while (true) {
        if (cache.allocateSlots(r, want, NO_HITS)) {
          scheduled = true;
          break;
        }
        EngineRequest victim = running.remove(running.size() - 1);
        preempt(victim);
        preempted++;
        if (victim == r) {
          break;
        }
      }
      if (!scheduled) {
        break;
      }
      reqs[n] = r;
      tokens[n] = want;
      before[n] = r.numComputedTokens;
      n++;
      budget -= want;
      i++;
    }

    if (preempted == 0) {
      while (!waiting.isEmpty() && budget > 0 && running.size() < config.maxNumSeqs()) {
        EngineRequest r = waiting.peekFirst();
        int[] hits = r.numComputedTokens == 0 ? cache.computedBlocks(r) : NO_HITS;
        int computed = r.numComputedTokens + hits.length * config.blockSize();
        int want = r.numTokens - computed;
        if (config.longPrefillTokenThreshold() > 0 && want > config.longPrefillTokenThreshold()) {
          want = config.longPrefillTokenThreshold();
        }
        if (!config.enableChunkedPrefill() && want > budget) {
          break;
        }
        want = Math.min(want, budget);
        if (!cache.allocateSlots(r, want, hits)) {
          break;
        }
        waiting.pollFirst();
        running.add(r);
        r.status = EngineRequest.Status.RUNNING;
        r.numComputedTokens = computed;
        if (r.numCachedTokens < 0) {
          r.numCachedTokens = computed;
          counters.prefixQueryTokens += r.numTokens;
          counters.prefixHitTokens += computed;
          counters.promptTokens += r.numPromptTokens;
          counters.cachedPromptTokens += computed;
        }
        if (n == reqs.length) {
          reqs = java.util.Arrays.copyOf(reqs, n * 2);
          tokens = java.util.Arrays.copyOf(tokens, n * 2);
          before = java.util.Arrays.copyOf(before, n * 2);
        }
        reqs[n] = r;
        tokens[n] = want;
        before[n] = computed;
        n++;
        budget -= want;
      }
    }

    StepWork.Builder work = new StepWork.Builder();
    for (int k = 0; k < n; k++) {
      EngineRequest r = reqs[k];
      int c = before[k];
      int q = tokens[k];
      boolean samples = c + q >= r.numTokens;
      boolean decode = r.numOutputTokens > 0 && q == 1 && c == r.numTokens - 1;
      if (!decode) {
        counters.prefillTokensComputed += q;
      }
      work.add(c, q, r.numPromptTokens, samples);
      r.numComputedTokens = c + q;
    }
    return new ScheduledStep(reqs, tokens, n, preempted, work.build());
  }

  /**
   * Applies the outputs of a step that ended at {@code endNanos}: requests whose computed tokens caught up
   * sample a token; those that reached their length finish and free their blocks.
   */
  public void complete(ScheduledStep step, long durationNanos, long endNanos) {
    counters.steps++;
    counters.busyNanos += durationNanos;
    boolean anyFinished = false;
    for (int k = 0; k < step.size; k++) {
      EngineRequest r = step.requests[k];
      if (r.status != EngineRequest.Status.RUNNING || r.numComputedTokens < r.numTokens) {
        continue;
      }
      int token = outputs.tokenAt(r.outputSeed, r.numOutputTokens);
      r.appendToken(token);
      int index = r.numOutputTokens++;
      counters.generationTokens++;
      if (index == 0) {
        r.firstTokenNanos = endNanos;
        counters.ttft.observe((endNanos - r.arrivalNanos) / 1e9);
      } else {
        counters.itl.observe((endNanos - r.lastTokenNanos) / 1e9);
      }
      r.lastTokenNanos = endNanos;
      boolean stop = r.numOutputTokens >= r.maxTokens || r.numTokens >= config.maxModelLen();
      try {
        r.observer.onToken(token, index, endNanos, r.numCachedTokens, stop);
      } catch (RuntimeException e) {
        log.warn("request observer failed on a token; the request continues", e);
      }
      if (stop) {
        finish(r, endNanos);
        anyFinished = true;
      }
    }
    if (anyFinished) {
      running.removeIf(EngineRequest::isFinished);
    }
  }

  private void finish(EngineRequest r, long endNanos) {
    r.status = EngineRequest.Status.FINISHED;
    cache.free(r);
    live.remove(r.id);
    counters.finishedRequests++;
    counters.e2e.observe((endNanos - r.arrivalNanos) / 1e9);
    RequestOutcome outcome = new RequestOutcome(r.id, FinishReason.LENGTH, r.numPromptTokens, r.numOutputTokens,
        Math.max(0, r.numCachedTokens), r.arrivalNanos, r.firstTokenNanos, endNanos, r.numPreemptions);
    try {
      r.observer.onFinished(outcome);
    } catch (RuntimeException e) {
      log.warn("request observer failed on completion", e);
    }
  }

  private void preempt(EngineRequest r) {
    cache.free(r);
    r.status = EngineRequest.Status.PREEMPTED;
    r.numComputedTokens = 0;
    r.numPreemptions++;
    counters.preemptions++;
    waiting.addFirst(r);
  }

  private void fail(RequestObserver observer, RequestFailure failure) {
    try {
      observer.onFailed(failure);
    } catch (RuntimeException e) {
      log.warn("request observer failed on a failure", e);
    }
  }

  private long rootSeed(RequestSpec spec) {
    String key = (spec.adapter() == null ? "" : spec.adapter()) + '\u0000'
        + (spec.cacheSalt() == null ? "\u0001" : spec.cacheSalt());
    Long seed = roots.get(key);
    if (seed == null) {
      seed = new CacheNamespace(config.model(), spec.adapter(), spec.cacheSalt()).rootSeed();
      if (roots.size() < 4096) {
        roots.put(key, seed);
      }
    }
    return seed;
  }

  /** The current counters plus this core's instantaneous state. */
  EngineStats stats(Counters c) {
    return new EngineStats(running.size(), waiting.size(), pool.usage(), config.numGpuBlocks(),
        pool.cachedBlockCount(), c.prefixQueryTokens, c.prefixHitTokens, c.promptTokens, c.cachedPromptTokens,
        c.prefillTokensComputed, c.generationTokens, c.finishedRequests, c.failedRequests, c.preemptions,
        c.evictionsBeforeRestart + pool.evictions(), c.steps, c.busyNanos, c.restarts, c.ttft.snapshot(),
        c.e2e.snapshot(), c.itl.snapshot());
  }

  /** This core's own counters (for a core made by {@link #create}); owner thread only. */
  public EngineStats stats() {
    return stats(counters);
  }

  long evictions() {
    return pool.evictions();
  }

  /**
   * Fails every waiting request: the safety net for a state the scheduler cannot make progress from (which
   * validation should make impossible). Returns how many were failed.
   */
  int failWaiting(String message) {
    int n = 0;
    while (!waiting.isEmpty()) {
      EngineRequest r = waiting.pollFirst();
      cache.free(r);
      live.remove(r.id);
      r.status = EngineRequest.Status.FINISHED;
      counters.failedRequests++;
      fail(r.observer, new RequestFailure(r.id, RequestFailure.Kind.INVALID, message));
      n++;
    }
    return n;
  }

  /**
   * For tests: structural invariants of the cache and the queues. Every block's reference count equals the
   * number of running requests whose block table holds it; waiting requests hold none; the running set never
   * exceeds {@code max_num_seqs}.
   */
  void checkInvariants() {
    pool.checkInvariants();
    int[] expected = new int[pool.numBlocks()];
    for (EngineRequest r : running) {
      if (r.status != EngineRequest.Status.RUNNING) {
        throw new IllegalStateException("non-running request in running set");
      }
      for (int i = 0; i < r.numBlocks; i++) {
        expected[r.blocks[i]]++;
      }
    }
    for (EngineRequest r : waiting) {
      if (r.numBlocks != 0) {
        throw new IllegalStateException("waiting request holds blocks");
      }
    }
    for (int b = 1; b < expected.length; b++) {
      if (expected[b] != pool.refCnt(b)) {
        throw new IllegalStateException("block " + b + " refcount " + pool.refCnt(b) + ", referenced by "
            + expected[b] + " running requests");
      }
    }
    if (running.size() > config.maxNumSeqs()) {
      throw new IllegalStateException("more running than max_num_seqs");
    }
  }

  KvBlockPool pool() {
    return pool;
  }

}
