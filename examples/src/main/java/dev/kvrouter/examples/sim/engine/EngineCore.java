package dev.kvrouter.examples.sim.engine;

import dev.kvrouter.index.wire.KvEvent;
import dev.kvrouter.examples.sim.timing.StepWork;
import dev.kvrouter.examples.sim.timing.TimingModel;
import dev.kvrouter.index.block.CacheNamespace;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
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
 * <p>With a CPU offload tier ({@link EngineConfig#numCpuBlocks()} > 0) the core also plays vLLM's
 * {@code OffloadingConnector} (scheduler side) over a {@link CpuOffloadManager}:
 * <ul>
 *   <li><b>Store on compute</b> (write-through, not on GPU eviction): after each schedule, every scheduled request's
 *       full blocks up to its computed-plus-scheduled tokens that the tier does not hold yet are prepared for
 *       store; the copies start when the step ends (vLLM defers them to the start of the next step), run one after
 *       another on the device-to-host link, and the blocks become ready when the copy is done. A cached GPU block
 *       whose copy is still in flight is never evicted before it completes (vLLM flushes the job first).
 *   <li><b>Load instead of recompute</b>: a new request looks up the blocks after its GPU prefix hit in the tier
 *       (up to its last full block); on a hit it gets GPU blocks for them, leaves the schedulable queue
 *       ({@code WAITING_FOR_REMOTE_KVS}) while the host-to-device copy runs, then continues with those tokens
 *       computed. The copy delays that request only; steps go on meanwhile. If the whole prompt was found, the
 *       last token is recomputed, and {@code cached_tokens} is {@code prompt - 1}.
 *   <li>Completions of copies are noticed at the end of a step, or when an idle engine polls at the copy's end.
 * </ul>
 *
 * <p>Time is not here: {@link SimEngine} asks for a step, lets the timing model decide how long it takes, and
 * completes it at the clock time it ends. Single-threaded: every method runs on the engine's owner thread.
 */
public final class EngineCore {

  private static final Logger log = LoggerFactory.getLogger(EngineCore.class);
  private static final int[] NO_HITS = new int[0];
  private static final int LOAD_DEFERRED = -1;
  private static final int LOAD_NO_ROOM = -2;

  private final EngineConfig config;
  private final KvBlockPool pool;
  private final KvCacheManager cache;
  private final OutputTokens outputs;
  private final Counters counters;
  private final ArrayDeque<EngineRequest> waiting = new ArrayDeque<>();
  private final ArrayList<EngineRequest> running = new ArrayList<>();
  private final Map<String, EngineRequest> live = new HashMap<>();
  private final Map<String, Long> roots = new HashMap<>();
  /** vLLM's encoder cache, sized as its default: one step's token budget. */
  private final EncoderCache encoderCache;

  /** The CPU offload tier, or null when off. */
  private final CpuOffloadManager offload;
  private final TimingModel timing;
  /** Store copies prepared by the last schedule, started when its step ends. */
  private final List<Transfer> unsubmittedStores = new ArrayList<>();
  private final ArrayDeque<Transfer> stores = new ArrayDeque<>();
  private final ArrayDeque<Transfer> loads = new ArrayDeque<>();
  /** Identities being loaded (vLLM's {@code _blocks_being_loaded}): a second request for them waits. */
  private final HashSet<Long> beingLoaded = new HashSet<>();
  private long d2hFreeAt;
  private long h2dFreeAt;
  private long nowNanos;

  /** One offload copy: a store job (device to host) or a request's load (host to device). */
  private static final class Transfer {
    final EngineRequest request;
    final long[] ids;
    /** For a load: the index of the first loaded block in the request. */
    final int firstBlock;
    long doneNanos;

    Transfer(EngineRequest request, long[] ids, int firstBlock) {
      this.request = request;
      this.ids = ids;
      this.firstBlock = firstBlock;
    }
  }

  EngineCore(EngineConfig config, long engineHashSeed, OutputTokens outputs, Counters counters) {
    this(config, engineHashSeed, outputs, counters, null);
  }

  EngineCore(EngineConfig config, long engineHashSeed, OutputTokens outputs, Counters counters,
      TimingModel timing) {
    this.config = config;
    this.pool = new KvBlockPool(config.numGpuBlocks(), engineHashSeed, true);
    this.cache = new KvCacheManager(pool, config.blockSize(), config.maxModelLen(), config.enablePrefixCaching());
    this.outputs = outputs;
    this.counters = counters;
    this.timing = timing != null ? timing : w -> 0L;
    this.offload = config.offloadEnabled() ? new CpuOffloadManager(config.numCpuBlocks()) : null;
    this.encoderCache = new EncoderCache(config.maxNumBatchedTokens());
    if (offload != null) {
      pool.beforeEvict(this::flushStoreOf);
    }
  }

  /** A standalone core with its own counters (tests, benchmarks); offload copies take no time. */
  public static EngineCore create(EngineConfig config, long engineHashSeed, OutputTokens outputs) {
    return new EngineCore(config, engineHashSeed, outputs, new Counters());
  }

  /** A standalone core whose offload copies take the time {@code timing} says. */
  public static EngineCore create(EngineConfig config, long engineHashSeed, OutputTokens outputs,
      TimingModel timing) {
    return new EngineCore(config, engineHashSeed, outputs, new Counters(), timing);
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

  /**
   * vLLM's {@code reset_prefix_cache} (with the connector's cache): false if a request still holds blocks or an
   * offload copy is in flight. The one {@code AllBlocksCleared} covers every tier.
   */
  public boolean resetPrefixCache() {
    if (hasPendingTransfers()) {
      return false;
    }
    if (!pool.resetPrefixCache()) {
      return false;
    }
    if (offload != null && !offload.clear()) {
      throw new IllegalStateException("CPU tier busy with no copy in flight");
    }
    return true;
  }

  /**
   * Events produced since the last call: the GPU pool's (stores and evictions of scheduling, clears), then the
   * offload connector's, the order vLLM's scheduler collects them in for one batch.
   */
  public List<KvEvent> takeEvents() {
    List<KvEvent> gpu = pool.takeEvents();
    if (offload == null) {
      return gpu;
    }
    List<KvEvent> cpu = offload.takeEvents();
    if (cpu.isEmpty()) {
      return gpu;
    }
    if (gpu.isEmpty()) {
      return cpu;
    }
    List<KvEvent> all = new ArrayList<>(gpu.size() + cpu.size());
    all.addAll(gpu);
    all.addAll(cpu);
    return all;
  }

  /** Whether an offload copy is prepared or in flight. */
  public boolean hasPendingTransfers() {
    return !loads.isEmpty() || !stores.isEmpty() || !unsubmittedStores.isEmpty();
  }

  /** When the earliest copy in flight ends, or {@link Long#MAX_VALUE}. */
  public long nextTransferNanos() {
    long t = Long.MAX_VALUE;
    if (!loads.isEmpty()) {
      t = Math.min(t, loads.peekFirst().doneNanos);
    }
    if (!stores.isEmpty()) {
      t = Math.min(t, stores.peekFirst().doneNanos);
    }
    return t;
  }

  /**
   * Applies every offload copy that ended by {@code now}: stored blocks become ready in the CPU tier (and are
   * announced), loaded requests become schedulable with their loaded tokens computed and cached.
   */
  public void pollTransfers(long now) {
    nowNanos = Math.max(nowNanos, now);
    while (!stores.isEmpty() && stores.peekFirst().doneNanos <= now) {
      offload.completeStore(stores.pollFirst().ids);
    }
    int b = config.blockSize();
    while (!loads.isEmpty() && loads.peekFirst().doneNanos <= now) {
      Transfer t = loads.pollFirst();
      offload.completeLoad(t.ids, 0, t.ids.length);
      for (long id : t.ids) {
        beingLoaded.remove(id);
      }
      EngineRequest r = t.request;
      if (r.status != EngineRequest.Status.WAITING_FOR_KV) {
        continue; // aborted or failed while loading; its blocks are already free
      }
      int blocks = t.firstBlock + t.ids.length;
      int computed = blocks * b;
      if (computed >= r.numTokens) {
        computed = r.numTokens - 1; // the last token is recomputed to produce the first output's logits
      }
      cache.cacheBlocks(r, computed);
      r.numComputedTokens = computed;
      r.nextStoredBlock = blocks;
      r.status = EngineRequest.Status.WAITING;
    }
  }

  /** Decides the next step at the current time (the last time this core was told). */
  public ScheduledStep schedule() {
    return schedule(nowNanos);
  }

  /**
   * Decides the next step, starting at {@code now} (offload loads start then). Advances each scheduled request's
   * computed-token count, as vLLM does.
   */
  public ScheduledStep schedule(long now) {
    nowNanos = Math.max(nowNanos, now);
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
      want = stopBeforeImage(r, r.numComputedTokens, want);
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
      Iterator<EngineRequest> it = waiting.iterator();
      while (it.hasNext() && budget > 0 && running.size() < config.maxNumSeqs()) {
        EngineRequest r = it.next();
        if (r.status == EngineRequest.Status.WAITING_FOR_KV) {
          continue; // its offload load is in flight (vLLM skips WAITING_FOR_REMOTE_KVS requests)
        }
        boolean fresh = r.numComputedTokens == 0 && r.numBlocks == 0;
        int[] hits = fresh ? cache.computedBlocks(r) : NO_HITS;
        if (offload != null && fresh) {
          int loading = startLoad(r, hits);
          if (loading == LOAD_DEFERRED) {
            continue;
          }
          if (loading == LOAD_NO_ROOM) {
            break;
          }
          if (loading > 0) {
            continue;
          }
        }
        int computed = r.numComputedTokens + hits.length * config.blockSize();
        int want = r.numTokens - computed;
        if (config.longPrefillTokenThreshold() > 0 && want > config.longPrefillTokenThreshold()) {
          want = config.longPrefillTokenThreshold();
        }
        if (!config.enableChunkedPrefill() && want > budget) {
          break;
        }
        want = Math.min(want, budget);
        want = stopBeforeImage(r, computed, want);
        if (!cache.allocateSlots(r, want, hits)) {
          break;
        }
        it.remove();
        running.add(r);
        r.status = EngineRequest.Status.RUNNING;
        r.numComputedTokens = computed;
        if (r.numCachedTokens < 0) {
          // vLLM's num_cached_tokens: local and external (offloaded) hits, after the last-token rule
          r.numCachedTokens = computed;
          counters.prefixQueryTokens += r.numTokens;
          counters.prefixHitTokens += r.localHitTokens >= 0 ? r.localHitTokens : computed;
          if (offload != null) {
            counters.externalQueryTokens += r.numTokens;
            counters.externalHitTokens += r.externalTokens;
          }
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
      if (r.nextMedia < r.media.length) {
        work.encode(encodeMedia(r, c, c + q));
      }
      r.numComputedTokens = c + q;
      if (offload != null) {
        prepareStore(r, c + q);
      }
    }
    return new ScheduledStep(reqs, tokens, n, preempted, work.build());
  }

  /**
   * With {@link EngineConfig#disableChunkedMmInput()}: a chunk of {@code want} tokens from {@code computed} that
   * starts before an image and would end inside it is cut back to the image's start, as vLLM's
   * {@code _try_schedule_encoder_inputs} does (an image the prefix hit already entered is not rolled back).
   */
  private int stopBeforeImage(EngineRequest r, int computed, int want) {
    if (!config.disableChunkedMmInput()) {
      return want;
    }
    for (int i = r.nextMedia; i < r.media.length; i++) {
      MediaSpan m = r.media[i];
      if (m.offset() >= computed + want) {
        break;
      }
      if (computed < m.offset() && computed + want < m.end()) {
        return m.offset() - computed;
      }
    }
    return want;
  }

  /**
   * vLLM's {@code _try_schedule_encoder_inputs} for a chunk computing positions {@code [from, to)}: each media item
   * the chunk reaches for the first time is encoded, unless its positions are already computed (a prefix hit: vLLM
   * skips an item that ends at or before {@code num_computed_tokens}) or its output is in the encoder cache.
   *
   * @return items the vision encoder runs on in this step
   */
  private int encodeMedia(EngineRequest r, int from, int to) {
    int encoded = 0;
    while (r.nextMedia < r.media.length && r.media[r.nextMedia].offset() < to) {
      MediaSpan m = r.media[r.nextMedia++];
      if (m.end() <= from) {
        counters.encoderSkippedByPrefix++;
      } else if (encoderCache.hit(m.identifier())) {
        counters.encoderCacheHits++;
      } else {
        encoderCache.put(m.identifier(), m.length());
        counters.encoderRuns++;
        encoded++;
      }
    }
    return encoded;
  }

  /**
   * The connector's {@code get_num_new_matched_tokens} and, on a hit, the allocation and load start: looks the
   * blocks after the GPU hit up in the CPU tier, touches the request's blocks there, and starts the load.
   *
   * @return tokens being loaded, 0 for no hit, {@link #LOAD_DEFERRED} when another request is loading some of
   *     them, {@link #LOAD_NO_ROOM} when the GPU blocks for them cannot be allocated
   */
  private int startLoad(EngineRequest r, int[] hits) {
    int b = config.blockSize();
    int local = hits.length;
    int full = r.numTokens / b;
    long[] ids = r.blockHashes(full);
    int n = full - local >= 1 ? offload.lookup(ids, local, full) : 0;
    offload.touch(ids, 0, full);
    if (n == 0) {
      return 0;
    }
    for (int i = local; i < local + n; i++) {
      if (beingLoaded.contains(ids[i])) {
        return LOAD_DEFERRED;
      }
    }
    int ext = n * b;
    if (!cache.allocateSlots(r, ext, hits, false)) {
      return LOAD_NO_ROOM;
    }
    r.localHitTokens = local * b;
    r.externalTokens = ext;
    r.status = EngineRequest.Status.WAITING_FOR_KV;
    offload.prepareLoad(ids, local, local + n);
    Transfer t = new Transfer(r, Arrays.copyOfRange(ids, local, local + n), local);
    long copy = timing.kvTransferNanos(ext);
    t.doneNanos = Math.max(nowNanos, h2dFreeAt) + copy;
    h2dFreeAt = t.doneNanos;
    loads.addLast(t);
    for (long id : t.ids) {
      beingLoaded.add(id);
    }
    counters.offloadLoadBytes += timing.kvBytes(ext);
    counters.offloadLoadNanos += copy;
    return ext;
  }

  /**
   * The connector's store side for one scheduled request: the full blocks its tokens fill by the end of this step
   * that the tier does not hold yet are prepared for store (evicting CPU blocks as needed).
   */
  private void prepareStore(EngineRequest r, int tokensAfterStep) {
    int b = config.blockSize();
    int n = Math.min(tokensAfterStep, r.numTokens) / b;
    if (n <= r.nextStoredBlock) {
      return;
    }
    int all = r.numTokens / b;
    long[] ids = r.blockHashes(all);
    long[] candidates = Arrays.copyOfRange(ids, r.nextStoredBlock, n);
    long[] hashes = new long[candidates.length];
    for (int i = 0; i < hashes.length; i++) {
      hashes[i] = pool.engineHash(candidates[i]);
    }
    int[] chosen = offload.prepareStore(candidates, hashes);
    if (chosen == null) {
      counters.offloadStoresSkipped++;
      return; // no evictable CPU block: tried again at the next step
    }
    r.nextStoredBlock = n;
    if (chosen.length == 0) {
      return;
    }
    offload.touch(ids, 0, all);
    long[] toStore = new long[chosen.length];
    for (int i = 0; i < chosen.length; i++) {
      toStore[i] = candidates[chosen[i]];
    }
    unsubmittedStores.add(new Transfer(r, toStore, -1));
  }

  /** Starts the store copies of the last schedule: vLLM submits them when the next step starts. */
  private void submitStores(long at) {
    int b = config.blockSize();
    for (Transfer t : unsubmittedStores) {
      long copy = timing.kvTransferNanos((long) t.ids.length * b);
      t.doneNanos = Math.max(at, d2hFreeAt) + copy;
      d2hFreeAt = t.doneNanos;
      stores.addLast(t);
      counters.offloadStoreBytes += timing.kvBytes((long) t.ids.length * b);
      counters.offloadStoreNanos += copy;
    }
    unsubmittedStores.clear();
  }

  /**
   * vLLM's store fence: a GPU block is not overwritten while its copy to the CPU tier is in flight; the job is
   * flushed (completed) first.
   */
  private void flushStoreOf(long id) {
    if (!offload.isStoring(id)) {
      return;
    }
    for (Iterator<Transfer> it = stores.iterator(); it.hasNext(); ) {
      Transfer t = it.next();
      for (long x : t.ids) {
        if (x == id) {
          it.remove();
          offload.completeStore(t.ids);
          return;
        }
      }
    }
  }

  /**
   * Applies the outputs of a step that ended at {@code endNanos}: requests whose computed tokens caught up
   * sample a token; those that reached their length finish and free their blocks.
   */
  public void complete(ScheduledStep step, long durationNanos, long endNanos) {
    nowNanos = Math.max(nowNanos, endNanos);
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
    if (offload != null) {
      submitStores(endNanos);
      pollTransfers(endNanos);
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
    r.nextMedia = 0;
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
        c.e2e.snapshot(), c.itl.snapshot(), offloadStats(c, offload == null ? 0 : offload.size(),
            offload == null ? 0 : offload.evictions()), EngineStats.Media.of(c), c.firstTokenLateNanos);
  }

  /** The offload figures of {@code c} with the tier's current size and evictions; NONE when off. */
  static EngineStats.Offload offloadStats(Counters c, EngineConfig config, int held, long evictions) {
    if (!config.offloadEnabled()) {
      return EngineStats.Offload.NONE;
    }
    return new EngineStats.Offload(config.numCpuBlocks(), held, c.externalQueryTokens, c.externalHitTokens,
        c.offloadLoadBytes, c.offloadLoadNanos, c.offloadStoreBytes, c.offloadStoreNanos, c.offloadStoresSkipped,
        c.cpuEvictionsBeforeRestart + evictions);
  }

  private EngineStats.Offload offloadStats(Counters c, int held, long evictions) {
    return offloadStats(c, config, held, evictions);
  }

  long cpuEvictions() {
    return offload == null ? 0 : offload.evictions();
  }

  /** The CPU tier, or null; for tests. */
  CpuOffloadManager offload() {
    return offload;
  }

  /** This core's own counters (for a core made by {@link #create}); owner thread only. */
  public EngineStats stats() {
    return stats(counters);
  }

  long evictions() {
    return pool.evictions();
  }

  /** Leading blocks of {@code identities[0..n)} cached on GPU (see {@link SimEngine#cachedLeadNow}). */
  int cachedLead(long[] identities, int n) {
    int i = 0;
    while (i < n && pool.lookup(identities[i]) >= 0) {
      i++;
    }
    return i;
  }

  void forEachCachedIdentity(java.util.function.LongConsumer sink) {
    pool.forEachCachedIdentity(sink);
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
   * number of requests whose block table holds it; waiting requests hold none unless an offload load gave them
   * blocks; the running set never
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
      // only a request loading from the CPU tier, or loaded and not yet admitted, holds blocks while waiting
      if (r.numBlocks != 0 && r.status != EngineRequest.Status.WAITING_FOR_KV && r.localHitTokens < 0) {
        throw new IllegalStateException("waiting request holds blocks");
      }
      for (int i = 0; i < r.numBlocks; i++) {
        expected[r.blocks[i]]++;
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
