package dev.kvrouter.examples.ab;

import dev.kvrouter.examples.loadgen.RequestBodies;
import dev.kvrouter.examples.report.LatencyStats;
import dev.kvrouter.examples.report.LoadSample;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.report.RouterSnapshot;
import dev.kvrouter.examples.report.RoutingOverhead;
import dev.kvrouter.examples.report.RunData;
import dev.kvrouter.examples.report.Sessions;
import dev.kvrouter.examples.report.WorkerCounters;
import dev.kvrouter.examples.sim.clock.VirtualClock;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.engine.EngineStats;
import dev.kvrouter.examples.sim.engine.MediaSpan;
import dev.kvrouter.examples.sim.engine.OutputTokens;
import dev.kvrouter.examples.sim.engine.RequestFailure;
import dev.kvrouter.examples.sim.engine.RequestObserver;
import dev.kvrouter.examples.sim.engine.RequestOutcome;
import dev.kvrouter.examples.sim.engine.RequestSpec;
import dev.kvrouter.examples.sim.engine.SimEngine;
import dev.kvrouter.examples.sim.events.SequencedKvEventBatch;
import dev.kvrouter.examples.sim.http.PromptEncoder;
import dev.kvrouter.examples.sim.replay.VirtualFleet;
import dev.kvrouter.examples.workload.Prompt;
import dev.kvrouter.examples.sim.http.ToolCallScript;
import dev.kvrouter.examples.workload.AgentAnswer;
import dev.kvrouter.examples.workload.ChatAnswers;
import dev.kvrouter.examples.workload.ChatText;
import dev.kvrouter.examples.workload.PromptIds;
import dev.kvrouter.examples.workload.SessionChain;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadRequest;
import dev.kvrouter.extproc.decision.DecisionLog;
import dev.kvrouter.extproc.decision.TruthCheck;
import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.LoadTracker;
import dev.kvrouter.extproc.load.Reservation;
import dev.kvrouter.extproc.load.ScrapedLoad;
import dev.kvrouter.extproc.load.WorkerHealth;
import dev.kvrouter.extproc.pipeline.PromptPipeline;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.PreparedRequest;
import dev.kvrouter.extproc.request.RequestBodyParser;
import dev.kvrouter.extproc.routing.Decision;
import dev.kvrouter.extproc.routing.KvAwarePolicy;
import dev.kvrouter.extproc.replicas.ReplicaSync;
import dev.kvrouter.extproc.routing.KvIndexOverlapSource;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.extproc.routing.PromptInfo;
import dev.kvrouter.extproc.routing.RequestTimings;
import dev.kvrouter.extproc.routing.RouteRequest;
import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.extproc.routing.RoutingConfig;
import dev.kvrouter.extproc.routing.StaleViewTrust;
import dev.kvrouter.extproc.routing.StandardPolicies;
import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import dev.kvrouter.index.events.EventApplier;
import dev.kvrouter.index.events.EventCounter;
import dev.kvrouter.index.events.EventPlaneHealth;
import dev.kvrouter.index.events.EventSource;
import dev.kvrouter.index.events.InProcessEventFollower;
import dev.kvrouter.index.events.WorkerEventHealth;
import dev.kvrouter.index.media.MediaIdentities;
import dev.kvrouter.index.wire.EventEncoder;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.HdrHistogram.Histogram;

/**
 * Replays one workload under one policy in virtual time, driving the router's own code against simulated vLLM
 * engines on one {@link VirtualClock}:
 *
 * <ul>
 *   <li>the {@link Router} with the standard policies, the policy chosen per request by the trusted
 *       {@code x-kvrouter-policy} value (as the A/B through Envoy does), optional {@code x-kvrouter-weights};
 *   <li>the {@link LoadLedger} behind a {@link LoadTracker}: reserved at the decision, the prefill part released
 *       at the first token, the rest at the end (or failure); blended with each worker's reported queue and KV
 *       usage every scrape interval, as the runtime's scraper does;
 *   <li>the {@link KvIndex} with the router's predicted entries, fed by the engines' KV events: every batch is
 *       encoded in the configured wire layout and goes through the subscriber's decoder, sequence follower
 *       (gaps, replay, stale views) and {@link EventApplier}, after the configured delay and drops;
 *   <li>block identities from {@link BlockHasher} over the request's namespace: directly for token-id prompts,
 *       through the request path ({@link RequestBodyParser}, chat template, tokenizer, {@link PromptPipeline})
 *       for chat prompts when a {@link ChatFront} is given, in which case the workers tokenize with the same
 *       resources. Images ({@link VirtualSetup#multimodal}) are expanded by the worker's encoder, which uses the
 *       router's own {@code MediaExpander}, and the engine gets each item's position and identifier
 *       ({@link RequestSpec#media}): its block keys and {@code BlockStored.extra_keys} are a real worker's, the
 *       client's uuid or, without one, the engine's own content hash that the router cannot reproduce.
 * </ul>
 *
 * <p>Virtual time: a request arrives at its workload arrival time, is routed and enters its engine at that
 * instant (the router's own latency is measured in wall time and reported, not added). A request that waits for
 * another ({@link WorkloadRequest#after}, the previous turn of a closed-loop conversation) is sent at its arrival
 * time or when that one finished or failed, whichever is later; the turns held back and for how long are counted
 * ({@link VirtualOutcome.Sessions}).
 *
 * <p>Model answers: when the workload scripts answers ({@link Workload#scriptsAnswers}), the engines' output is
 * {@link dev.kvrouter.examples.workload.TokenSpace#token} of the request's answer segment, so each engine
 * generates the scripted answer token for token (a pure function of the request, like greedy decoding) and the
 * later turns that resend it find its decode-filled blocks cached. A client resends what it received: if a turn
 * fails or stops short, later prompts of its session carry the tokens that were streamed, not the script
 * ({@link Prompt#withAnswersCut}). Chat answers with the request path ({@code multi-turn:format=chat,answers=model}
 * and a {@link ChatFront}) are text: the engine generates the tokenizer's encoding of the answer's text and the
 * template's end-of-turn token ({@link ChatAnswers}) as far as {@code max_tokens} lets it (the end of turn is cut,
 * {@link WorkloadRequest#generated}), and the next turn resends the words received
 * as the assistant message, rendered and tokenized again. Engines publish events at
 * the end of each step. Everything is deterministic for a seed, apart from the wall-time measurements.
 *
 * <p>Single-threaded: the caller's thread runs the clock, the engines, the router and the event plane.
 */
public final class VirtualRun {

  /** Bound on clock tasks of one run: a runaway loop fails instead of hanging. */
  private static final long MAX_TASKS = 4_000_000_000L;
  private static final long MAINTENANCE_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
  private static final long LEDGER_TTL_NANOS = TimeUnit.SECONDS.toNanos(300);

  private final Workload workload;
  private final String policy;
  private final VirtualSetup setup;
  private final ChatFront chat;
  private final DecisionLog records;

  private final VirtualClock clock = new VirtualClock(1.7e9);
  private final Clock javaClock = new VirtualJavaClock(clock);
  private final ThreadMXBean threads = ManagementFactory.getThreadMXBean();
  private final List<String> names = new ArrayList<>();
  private final Map<String, Integer> indexOf = new HashMap<>();
  private final List<WorkerId> ids = new ArrayList<>();
  /** The router replicas; requests are dealt to them in turn. */
  private final Replica[] replicas;
  private final long root;
  private final VirtualFleet fleet;
  private final EventEncoder encoder;
  private final long[] delivered;

  private final RequestRecord[] results;
  private final Histogram itl = LatencyStats.newMicrosHistogram();
  private final Histogram decisionMicros = LatencyStats.newMicrosHistogram();
  private final List<LoadSample> samples = new ArrayList<>();
  private final Map<String, Long> fallbacks = new TreeMap<>();
  private int arrived;
  /** Closed-loop edges and hold counts. */
  private final SessionChain chain;
  /** Per request: when it finished or failed, -1 before. */
  private final long[] doneNanos;
  /** Per request: its planned time passed while its predecessor was still running. */
  private final boolean[] heldBack;
  /** Scripted answers that arrived short (seed to tokens received): later prompts resend only those. */
  private final Map<Long, Integer> receivedShort = new HashMap<>();
  /** Scripted chat answers as the model emits them (text tokens + end of turn), or null. */
  private final ChatAnswers chatAnswers;
  /**
   * Whether scripted chat answers are generated from {@link #chatScripts}: with the tokenizer ({@link #chatAnswers})
   * or as the token stand-in's answer ({@link Workload#answerTokens}: the answer, its end marker cut by
   * {@code max_tokens}).
   */
  private final boolean chatScripted;
  /**
   * Scripted chat answers in flight as the model would emit them, by answer seed: the engines' output model reads
   * them, as far as {@code max_tokens} lets it ({@link WorkloadRequest#generated}).
   */
  private final Map<Long, int[]> chatScripts = new HashMap<>();
  /** Scripted tool-call answers in flight ({@code format=messages}), by answer seed: what the client receives. */
  private final Map<Long, ToolCallScript> toolScripts = new HashMap<>();
  private long fellBack;
  /** Sum and count of the eviction share the router's decisions with block hashes used. */
  private double evictionShareSum;
  private long evictionShareDecisions;
  private int finished;
  private int inFlight;
  private int maxInFlight;
  private long lastEndNanos;
  private long routerCpu;
  private long truthWithin;
  private long truthOver;
  private long truthUnder;
  private long predictedTokens;
  private long actualTokens;
  /** The miss breakdown, or null when off (the default: it costs a lookup per prompt block per worker). */
  private final MissBreakdown breakdown;
  private final MissBreakdown.Fleet engines;

  private VirtualRun(Workload workload, String policy, VirtualSetup setup, ChatFront chat,
      Consumer<String> decisionRecords, boolean missBreakdown) {
    this.workload = workload;
    this.policy = policy;
    this.setup = setup;
    this.chat = chat;
    if (workload.hasImages() && (chat == null || setup.multimodal() == null)) {
      throw new IllegalArgumentException(workload.name() + " sends images: it needs the request path of a multimodal "
          + "model (a ChatFront loaded with the model's multimodal spec and VirtualSetup.withMultimodal)");
    }
    if (chat == null && !workload.requests().isEmpty()
        && workload.requests().get(0).prompt().format() == Prompt.Format.MESSAGES) {
      // the stand-in ids know nothing of the tools and system blocks vLLM's conversion renders ahead of the history
      throw new IllegalArgumentException(workload.name() + " sends Messages API bodies: it needs the router's request "
          + "path (--tokenizer)");
    }
    if (chat == null && workload.agentReasoning() > 0) {
      // only the model's template writes a think block
      throw new IllegalArgumentException(workload.name() + " scripts thinking answers: it needs the router's request "
          + "path (--tokenizer)");
    }
    this.records = new DecisionLog(decisionRecords == null ? line -> {} : decisionRecords, javaClock, 16,
        decisionRecords != null);
    int n = setup.workers();
    List<Worker> fleetEntries = new ArrayList<>();
    List<EngineConfig> configs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      String name = setup.workerName(i);
      names.add(name);
      indexOf.put(name, i);
      ids.add(new WorkerId(name, 0));
      configs.add(setup.engineConfig(i));
      fleetEntries.add(new Worker(name, "127.0.0.1", 8100 + i, setup.model(), List.of(), Worker.Role.BOTH,
          new Worker.EventEndpoint("inproc://" + name, null, "", false), 1, setup.blockSize(), 1, null, false,
          Map.of("simulated", "virtual")));
    }
    WorkerRegistry registry = new WorkerRegistry();
    registry.replace(fleetEntries);
    encoder = setup.layout() == null ? null : new EventEncoder(setup.layout());
    VirtualFleet[] self = new VirtualFleet[1];
    replicas = new Replica[setup.routerReplicas()];
    for (int k = 0; k < replicas.length; k++) {
      replicas[k] = new Replica(k, registry, self);
    }
    root = CacheNamespace.of(setup.model()).rootSeed();
    delivered = new long[n];
    PromptEncoder outputs = chat != null ? chat.encoder() : null;
    dev.kvrouter.examples.workload.TokenSpace space = workload.tokenSpace();
    chatAnswers = chat != null && workload.scriptsAnswers() && workload.chatPrompts()
        ? chat.encoder().chatAnswers(space) : null;
    chatScripted = workload.scriptsAnswers() && workload.chatPrompts();
    OutputTokens model = chatScripted ? (seed, i) -> chatScripts.get(seed)[i]
        : workload.scriptsAnswers() ? space::token
        : outputs != null ? OutputTokens.cycling(outputs.outputVocabulary()) : OutputTokens.range(1000, 1000);
    fleet = new VirtualFleet(clock, names, configs, setup.preset().timingModel(), model, null,
        setup.replayBufferSteps(), this::onBatch, setup.seed() * 131 + 17);
    self[0] = fleet;
    if (!setup.faults().equals(dev.kvrouter.examples.sim.events.EventFaults.NONE)) {
      for (int i = 0; i < n; i++) {
        fleet.setEventFaults(i, setup.faults());
      }
    }
    results = new RequestRecord[workload.size()];
    int size = workload.size();
    chain = new SessionChain(workload.requests());
    doneNanos = new long[size];
    heldBack = new boolean[size];
    java.util.Arrays.fill(doneNanos, -1);
    long capacity = setup.engineConfig(0).numGpuBlocks();
    breakdown = missBreakdown ? new MissBreakdown(root, setup.blockSize(), capacity * n) : null;
    engines = new MissBreakdown.Fleet() {
      @Override
      public int workers() {
        return n;
      }

      @Override
      public int cachedLead(int w, long[] ids, int count) {
        return fleet.engine(w).cachedLeadNow(ids, count);
      }

      @Override
      public void forEachCached(int w, java.util.function.LongConsumer sink) {
        fleet.engine(w).forEachCachedIdentityNow(sink);
      }

      @Override
      public long capacityBlocks() {
        return capacity;
      }
    };
  }

  /**
   * One router replica as its own process would hold it: an index fed by its own subscription to every worker's
   * events and holding its own predictions, its own health views, ledger and scrapes. Replica 0 alone is the
   * single router of every earlier run, draw for draw.
   */
  private final class Replica {
    final KvIndex index;
    final EventPlaneHealth health;
    final StaleViewTrust staleViewTrust;
    final LoadLedger ledger;
    final Map<WorkerId, ScrapedLoad> scraped = new HashMap<>();
    final Router router;
    final PromptPipeline pipeline;
    final InProcessEventFollower[] followers;
    final EventApplier[] appliers;
    /** Shares this replica's reservations and predictions with the others; null when they share nothing. */
    final ReplicaSync sync;
    long staleTransitions;

    Replica(int k, WorkerRegistry registry, VirtualFleet[] fleetRef) {
      int n = setup.workers();
      index = new KvIndex(IndexConfig.defaults().withPredictions(setup.predictedTtl(),
          java.time.Duration.ofSeconds(120), 1 << 20, 4096), javaClock);
      health = new EventPlaneHealth(new SimpleMeterRegistry(), javaClock, setup.staleRecovery());
      health.addListener((w, stale, why) -> staleTransitions += stale ? 1 : 0);
      staleViewTrust = setup.staleViewTrust() ? new StaleViewTrust() : StaleViewTrust.NONE;
      health.addListener(staleViewTrust::staleChanged);
      ledger = new LoadLedger(clock::nanoTime, LEDGER_TTL_NANOS, 1_000_000);
      PrefixOverlapSource overlaps = new KvIndexOverlapSource(index);
      if (setup.replicaSyncDelay() != null && setup.routerReplicas() > 1) {
        long delay = setup.replicaSyncDelay().toNanos();
        // the link: every message reaches every other replica after the delay, in order
        sync = new ReplicaSync(k + 1, ledger, overlaps, m -> clock.schedule(clock.nanoTime() + delay, () -> {
          for (Replica other : replicas) {
            if (other != this) {
              other.sync.apply(m);
            }
          }
        }), clock::nanoTime, Long.MAX_VALUE / 4);
        ledger.setListener(sync.ledgerListener());
        overlaps = sync.sharing(overlaps);
      } else {
        sync = null;
      }
      LoadTracker load = new LoadTracker(ledger, setup.scrapeInterval().isZero() ? id -> null : scraped::get,
          clock::nanoTime, TimeUnit.SECONDS.toNanos(2));
      SplittableRandom rng = new SplittableRandom(setup.seed() * 31 + 7 + k);
      router = Router.builder(registry)
          .policies(StandardPolicies.create())
          .config(RoutingConfig.defaults(KvAwarePolicy.NAME))
          .overlaps(overlaps)
          .load(load)
          .health(WorkerHealth.alwaysHealthy())
          .staleViewTrust(staleViewTrust)
          .nanoTime(System::nanoTime)
          .random(() -> rng)
          .build();
      // Early stop as the runtime does by default; the chain is finished inline (deterministic) for predictions.
      pipeline = chat == null ? null
          : new PromptPipeline(overlaps, Runnable::run, System::nanoTime, true, new SimpleMeterRegistry());
      followers = new InProcessEventFollower[n];
      appliers = new EventApplier[n];
      for (int i = 0; i < n; i++) {
        int w = i;
        EventSource source = EventSource.connect(ids.get(i), setup.model(), setup.blockSize(),
            "inproc://" + names.get(i),
            setup.replayBufferSteps() > 0 ? "inproc://" + names.get(i) + "/replay" : null);
        if (encoder != null) {
          InProcessEventFollower.Replay replay = setup.replayBufferSteps() == 0 ? null : (from, sink) -> {
            for (SequencedKvEventBatch b : fleetRef[0].replay(w, from)) {
              sink.accept(b.seq(), encoder.encode(b.batch()));
            }
            return true;
          };
          followers[i] = new InProcessEventFollower(index, health, source, replay, javaClock);
        } else {
          var view = index.register(ids.get(i));
          view.setEventStream(true);
          WorkerEventHealth h = health.register(view);
          appliers[i] = new EventApplier(view, setup.model(), setup.blockSize(), h);
        }
      }
    }

    /** What this replica's metrics scraper would have read from every worker's /metrics just now. */
    void scrape() {
      long now = clock.nanoTime();
      for (int i = 0; i < names.size(); i++) {
        SimEngine e = fleet.engine(i);
        scraped.put(ids.get(i), new ScrapedLoad(e.runningNow(), e.waitingNow(), e.kvUsageNow(),
            e.config().numGpuBlocks(), now));
        ledger.scraped(ids.get(i));
      }
    }

    void maintain() {
      index.maintain();
      long ms = javaClock.millis();
      for (InProcessEventFollower f : followers) {
        if (f != null) {
          f.tick(ms);
        }
      }
      ledger.sweep();
    }
  }

  /**
   * Replays {@code workload} under {@code policy}.
   *
   * @param chat the request path and worker tokenizer for chat prompts, or null to send chat workloads as their
   *     token stand-ins ({@link Workload#promptTokens}), hashed like token prompts
   */
  public static VirtualOutcome run(Workload workload, String policy, VirtualSetup setup, ChatFront chat) {
    return new VirtualRun(workload, policy, setup, chat, null, false).replay();
  }

  /**
   * As {@link #run(Workload, String, VirtualSetup, ChatFront)}, writing the router's decision records (the
   * {@code kvrouter.decisions} JSON lines: decision, then outcome with the truth check) to {@code records}.
   */
  public static VirtualOutcome run(Workload workload, String policy, VirtualSetup setup, ChatFront chat,
      Consumer<String> records) {
    return new VirtualRun(workload, policy, setup, chat, records, false).replay();
  }

  /**
   * As {@link #run(Workload, String, VirtualSetup, ChatFront, Consumer)} ({@code records} may be null), with the
   * {@link MissBreakdown} on when {@code missBreakdown}: {@link VirtualOutcome#missBreakdown} is then filled.
   */
  public static VirtualOutcome run(Workload workload, String policy, VirtualSetup setup, ChatFront chat,
      Consumer<String> records, boolean missBreakdown) {
    return new VirtualRun(workload, policy, setup, chat, records, missBreakdown).replay();
  }

  private VirtualOutcome replay() {
    if (chat != null && workload.chatPrompts()) {
      chat.warm(workload, setup.model());
    }
    for (WorkloadRequest r : workload.requests()) {
      clock.schedule(TimeUnit.MICROSECONDS.toNanos(r.arrivalMicros()), () -> due(r));
    }
    long sampleNanos = setup.sampleInterval().toNanos();
    long scrapeNanos = setup.scrapeInterval().toNanos();
    clock.schedule(0, new Periodic(sampleNanos, this::sample));
    if (scrapeNanos > 0) {
      for (int k = 0; k < replicas.length; k++) {
        // replicas scrape on their own timers, spread over the interval; replica 0 at the old instants
        Replica replica = replicas[k];
        clock.schedule(scrapeNanos * k / replicas.length, new Periodic(scrapeNanos, () -> scrape(replica)));
      }
    }
    clock.schedule(0, new Periodic(MAINTENANCE_NANOS, this::maintain));
    if (breakdown != null) {
      clock.schedule(0, new Periodic(TimeUnit.SECONDS.toNanos(1), () -> breakdown.sample(engines)));
    }
    long t0 = System.nanoTime();
    clock.runUntilIdle(MAX_TASKS);
    double wall = (System.nanoTime() - t0) / 1e9;
    return outcome(wall);
  }

  /** Reschedules itself while the workload is not done. */
  private final class Periodic implements Runnable {
    private final long period;
    private final Runnable body;

    Periodic(long period, Runnable body) {
      this.period = period;
      this.body = body;
    }

    @Override
    public void run() {
      body.run();
      if (finished < results.length) {
        clock.schedule(clock.nanoTime() + period, this);
      }
    }
  }

  /** The request's planned time: send it, or hold it until the request it waits for is done. */
  private void due(WorkloadRequest r) {
    int p = chain.predecessor(r.index());
    if (p >= 0 && doneNanos[p] < 0) {
      heldBack[r.index()] = true;
      return;
    }
    arrive(r);
  }

  /**
   * Request {@code i} finished or failed at {@code atNanos}; a held-back successor is sent then. Scheduled rather
   * than called, since the engine is inside its step when it reports.
   */
  private void done(int i, long atNanos) {
    doneNanos[i] = atNanos;
    int s = chain.successor(i);
    if (s >= 0 && heldBack[s]) {
      WorkloadRequest next = workload.requests().get(s);
      chain.held(Math.max(0, atNanos - TimeUnit.MICROSECONDS.toNanos(next.arrivalMicros())));
      clock.schedule(atNanos, () -> arrive(next));
    }
  }

  /**
   * When request {@code r} was due: its planned time, or for a turn held back the moment its predecessor was done.
   * Its send lag is measured from here, as the driver measures it, since the hold is the conversation's and counted
   * apart.
   */
  private long dueNanos(WorkloadRequest r) {
    long planned = TimeUnit.MICROSECONDS.toNanos(r.arrivalMicros());
    return heldBack[r.index()] ? Math.max(planned, doneNanos[chain.predecessor(r.index())]) : planned;
  }

  /** Records what the client received of a scripted answer, when it is less than the script. */
  private void received(WorkloadRequest r, int tokens) {
    if (r.answer() == null || chain.successor(r.index()) < 0) { // a last turn's answer is never resent
      return;
    }
    int[] script = chatScripted ? chatScripts.remove(r.answer().seed()) : null;
    ToolCallScript tool = toolScripts.remove(r.answer().seed());
    if (tool != null && r.prompt().format() == Prompt.Format.CHAT) {
      // a reasoning model's chat answer: the text's words that arrived, the thinking once the text began
      int words = tokens >= tool.textTokens() ? r.answer().length()
          : Math.max(0, ChatText.wordsHeld(tool.textReceived(tokens), r.answer(), workload.tokenSpace()));
      AgentAnswer.chatReceived(r.answer(), r.reasoning(), words, receivedShort);
    } else if (tool != null) {
      // a coding agent's answer: the text's words that arrived, and the call only if the answer ended its turn
      AgentAnswer a = AgentAnswer.of(r.answer(), workload.agentReasoning());
      int words = tokens >= tool.textTokens() ? a.text().length()
          : Math.max(0, ChatText.wordsHeld(tool.textReceived(tokens), a.text(), workload.tokenSpace()));
      a.received(words, tokens >= tool.tokens().length, receivedShort);
    } else if (script != null && chatAnswers == null) {
      // the stand-in: one token per answer token
      int kept = Math.min(tokens, r.answer().length());
      if (kept < r.answer().length()) {
        receivedShort.put(r.answer().seed(), kept);
      }
    } else if (script != null) {
      // the client holds the words whose tokens arrived (all of them once only the end of turn is missing)
      int words = tokens >= script.length - 1 ? r.answer().length() : chatAnswers.wordsReceived(r.answer(), tokens);
      if (words < r.answer().length()) {
        receivedShort.put(r.answer().seed(), words);
      }
    } else if (tokens < r.answer().length()) {
      receivedShort.put(r.answer().seed(), tokens);
    }
  }

  private void arrive(WorkloadRequest r) {
    // Envoy deals ext_proc streams to the replicas in turn (the cluster's round robin)
    Replica replica = replicas[arrived % replicas.length];
    arrived++;
    long c0 = cpu();
    int[] tokens;
    List<MediaSpan> media = List.of();
    RouteRequest rr;
    PromptPipeline.Outcome prompt = null;
    ToolCallScript tool = null;
    if (chat != null && r.prompt().format().templated()) {
      Prompt sent = r.prompt().withAnswersCut(receivedShort);
      byte[] body = RequestBodies.body(workload, r, sent, setup.model());
      if (r.answer() != null && (sent.format() == Prompt.Format.MESSAGES || r.reasoning() > 0)) {
        // the worker's work, computed before the router's clock starts
        tool = chat.toolCallScript(ChatFront.kind(sent), body);
        c0 = cpu();
      }
      PreparedRequest prepared;
      try {
        prepared = chat.preparer().prepare(ChatFront.kind(sent), body, body.length, null);
      } catch (RequestBodyParser.BadRequest e) {
        throw new IllegalStateException("the workload produced a request the router refuses: " + e.error(), e);
      }
      prompt = replica.pipeline.run(prepared);
      rr = new RouteRequest(r.id(), prepared.request(), prepared.scope().tenantHash(), policy, setup.weights(),
          prompt.prompt(), prompt.unavailable(), 0, prompt.timings());
      long c1 = cpu();
      routerCpu += c1 - c0;
      // the worker's own tokenization and media expansion: not router work
      PromptEncoder.ChatTokens engineView;
      try {
        engineView = chat.encoder().prompt(prepared.request());
      } catch (PromptEncoder.BadInput e) {
        throw new IllegalStateException(r.id() + ": the simulated worker refuses it (" + e.getMessage() + "); image "
            + "workloads need a multimodal model (VirtualSetup.withMultimodal, ChatFront with its spec)", e);
      }
      tokens = engineView.tokens();
      media = engineView.media();
      c0 = cpu();
    } else {
      tokens = workload.promptTokens(r.prompt().withAnswersCut(receivedShort));
      long th = System.nanoTime();
      long[] hashes = BlockHasher.hashFullBlocks(root, tokens, tokens.length, setup.blockSize());
      long hashNanos = System.nanoTime() - th;
      rr = new RouteRequest(r.id(),
          new InferenceRequest(InferenceRequest.Kind.COMPLETIONS, setup.model(), true, null, r.outputTokens()), null,
          policy, setup.weights(), new PromptInfo(tokens.length, setup.blockSize(), hashes), null, 0,
          new RequestTimings(0, 0, 0, hashNanos));
    }
    Decision d = replica.router.route(rr);
    int[] routerLead = breakdown == null ? null : routerLeads(d);
    records.decision(d);
    if (prompt != null && d.routed()) {
      prompt.complete(d.detail().chosen().id());
    }
    if (d.routed() && d.detail().shape().fullBlocks() > 0) {
      evictionShareSum += d.detail().evictionShare();
      evictionShareDecisions++;
    }
    routerCpu += cpu() - c0;
    RequestTimings t = rr.timings();
    decisionMicros.recordValue(Math.max(0, (d.decisionNanos() + t.hashNanos() + t.tokenizeNanos()
        + t.templateNanos() + t.parseNanos()) / 1000));
    if (d.fallback() != null) {
      fellBack++;
      for (String f : d.fallback().split(",")) {
        fallbacks.merge(f, 1L, Long::sum);
      }
    }
    long at = clock.nanoTime();
    PromptIds engineIds = breakdown == null ? null : new PromptIds(tokens, media);
    // a scripted chat answer as the model emits it: the answer text's tokens, then its end-of-turn token
    int[] chatScript = !chatScripted || r.answer() == null ? null
        : tool != null ? tool.tokens()
        : chatAnswers != null ? chatAnswers.tokens(r.answer()) : workload.answerTokens(r);
    // what the engine generates and caches after the prompt (the script as far as max_tokens lets it), for the
    // breakdown's ideals
    int[] generated = breakdown == null ? null
        : chatScript != null ? r.generated(chatScript) : workload.answerTokens(r);
    if (!d.routed()) {
      if (breakdown != null) {
        breakdown.decided(engineIds, generated, -1, routerLead, 0, engines);
      }
      fail(r, at, null, d.id(), "http_" + d.rejection().status(), d.rejection().status());
      return;
    }
    int w = indexOf.get(d.chosen().name());
    int outputTokens = r.outputTokens();
    if (chatScript != null) {
      // the model ends its turn after the answer text's tokens unless max_tokens cuts it first (as the load
      // generator's max_tokens, the answer's words, always does: the worker behind HTTP cuts it there too)
      chatScripts.put(r.answer().seed(), chatScript);
      if (tool != null) {
        toolScripts.put(r.answer().seed(), tool);
      }
      outputTokens = r.generated(chatScript).length;
    }
    RequestSpec spec = new RequestSpec(r.id(), tokens, outputTokens, null, null,
        r.answer() != null ? r.answer().seed() : r.index(), media);
    SimEngine engine = fleet.engine(w);
    String invalid = engine.validate(spec);
    MissBreakdown.Pending pending = breakdown == null ? null
        : breakdown.decided(engineIds, generated, invalid == null ? w : -1, routerLead,
            (int) (d.detail().predictedCachedTokens() / setup.blockSize()), engines);
    if (invalid != null) {
      // The worker answers 400 at once; the router releases on the response, as through Envoy.
      release(replica, d.reservation());
      fail(r, at, names.get(w), d.id(), "http_400", 400);
      return;
    }
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    fleet.submit(w, spec, new Observer(replica, r, d, at, pending));
  }

  /** Per worker, the router's effective overlap (blocks) at decision {@code d}; 0 for a worker not scored. */
  private int[] routerLeads(Decision d) {
    int[] lead = new int[names.size()];
    if (d.detail() != null) {
      for (dev.kvrouter.extproc.routing.Candidate c : d.detail().candidates()) {
        Integer i = indexOf.get(c.id().name());
        if (i != null) {
          lead[i] = c.overlap().effective();
        }
      }
    }
    return lead;
  }

  private final class Observer implements RequestObserver {
    private final Replica replica;
    private final WorkloadRequest request;
    private final Decision decision;
    private final long sentNanos;
    private long firstNanos = -1;
    private long lastNanos;
    private long maxGap = -1;
    private int chunks;
    private final MissBreakdown.Pending pending;

    Observer(Replica replica, WorkloadRequest request, Decision decision, long sentNanos,
        MissBreakdown.Pending pending) {
      this.replica = replica;
      this.request = request;
      this.decision = decision;
      this.sentNanos = sentNanos;
      this.pending = pending;
    }

    @Override
    public void onToken(int tokenId, int index, long atNanos, int cachedTokens, boolean last) {
      if (firstNanos < 0) {
        firstNanos = atNanos;
        long c0 = cpu();
        replica.ledger.prefillDone(decision.reservation()); // the first response byte
        routerCpu += cpu() - c0;
        if (pending != null) {
          breakdown.admitted(pending, cachedTokens / setup.blockSize());
        }
      } else {
        long gap = atNanos - lastNanos;
        itl.recordValue(Math.max(0, gap / 1000));
        maxGap = Math.max(maxGap, gap);
      }
      lastNanos = atNanos;
      chunks++;
    }

    @Override
    public void onFinished(RequestOutcome o) {
      release(replica, decision.reservation());
      inFlight--;
      finished++;
      lastEndNanos = Math.max(lastEndNanos, o.finishNanos());
      results[request.index()] = new RequestRecord(request.index(), request.id(), request.sessionId(),
          micros(dueNanos(request)), micros(sentNanos), micros(o.firstTokenNanos() - sentNanos),
          micros(o.finishNanos() - sentNanos), 200, null, names.get(indexOf.get(decision.chosen().name())),
          decision.id(), o.promptTokens(), o.cachedTokens(), o.completionTokens(), chunks,
          maxGap < 0 ? -1 : micros(maxGap));
      received(request, chunks);
      done(request.index(), o.finishNanos());
      replica.staleViewTrust.report(decision, o.cachedTokens());
      long predicted = decision.detail().predictedCachedTokens();
      records.outcome(decision, 200, false, new TruthCheck(predicted, o.cachedTokens(), setup.blockSize()),
          o.promptTokens(), (o.firstTokenNanos() - sentNanos) / 1e6, (o.finishNanos() - sentNanos) / 1e6);
      long err = predicted - o.cachedTokens();
      predictedTokens += predicted;
      actualTokens += o.cachedTokens();
      if (Math.abs(err) < setup.blockSize()) {
        truthWithin++;
      } else if (err > 0) {
        truthOver++;
      } else {
        truthUnder++;
      }
    }

    @Override
    public void onFailed(RequestFailure f) {
      release(replica, decision.reservation());
      inFlight--;
      long now = clock.nanoTime();
      results[request.index()] = new RequestRecord(request.index(), request.id(), request.sessionId(),
          micros(dueNanos(request)), micros(sentNanos), -1, micros(now - sentNanos),
          f.kind().httpStatus(), "http_" + f.kind().httpStatus(), names.get(indexOf.get(decision.chosen().name())),
          decision.id(), -1, -1, -1, chunks, -1);
      finished++;
      lastEndNanos = Math.max(lastEndNanos, now);
      received(request, chunks);
      done(request.index(), now);
    }
  }

  private void release(Replica replica, Reservation r) {
    long c0 = cpu();
    replica.ledger.release(r);
    routerCpu += cpu() - c0;
  }

  private void fail(WorkloadRequest r, long atNanos, String worker, String decisionId, String error, int status) {
    results[r.index()] = new RequestRecord(r.index(), r.id(), r.sessionId(), micros(dueNanos(r)), micros(atNanos),
        -1, 0, status, error, worker, decisionId, -1, -1, -1, 0, -1);
    finished++;
    lastEndNanos = Math.max(lastEndNanos, atNanos);
    received(r, 0);
    done(r.index(), atNanos);
  }

  private void onBatch(int worker, SequencedKvEventBatch b) {
    long c0 = cpu();
    delivered[worker]++;
    byte[] wire = encoder == null ? null : encoder.encode(b.batch());
    for (Replica replica : replicas) {
      if (wire != null) {
        replica.followers[worker].onLive(b.seq(), wire);
      } else {
        replica.appliers[worker].apply(b.batch());
      }
    }
    routerCpu += cpu() - c0;
  }

  private void sample() {
    long at = clock.nanoTime() / 1000;
    for (int i = 0; i < names.size(); i++) {
      SimEngine e = fleet.engine(i);
      samples.add(new LoadSample(at, names.get(i), e.runningNow(), e.waitingNow()));
    }
  }

  private void scrape(Replica replica) {
    long c0 = cpu();
    replica.scrape();
    routerCpu += cpu() - c0;
  }

  private void maintain() {
    long c0 = cpu();
    for (Replica replica : replicas) {
      replica.maintain();
    }
    routerCpu += cpu() - c0;
  }

  private VirtualOutcome outcome(double wall) {
    List<RequestRecord> list = new ArrayList<>(results.length);
    for (int i = 0; i < results.length; i++) {
      if (results[i] == null) {
        WorkloadRequest r = workload.requests().get(i);
        list.add(RequestRecord.unsent(i, r.id(), r.sessionId(), r.arrivalMicros(), "not_sent"));
      } else {
        list.add(results[i]);
      }
    }
    Map<String, WorkerCounters> counters = new HashMap<>();
    List<EngineStats> stats = fleet.stats();
    for (int i = 0; i < stats.size(); i++) {
      EngineStats s = stats.get(i);
      counters.put(names.get(i), new WorkerCounters(s.promptTokens(), s.prefixHitTokens(), s.prefixQueryTokens(),
          s.generationTokens(), s.finishedRequests(), s.prefillTokensComputed(), s.cachedPromptTokens(),
          s.ttft().sum(), s.ttft().count(), s.firstTokenLateNanos() / 1e9, Double.NaN, Double.NaN));
    }
    long decisions = decisionMicros.getTotalCount();
    RoutingOverhead overhead = new RoutingOverhead(decisions, decisions == 0 ? 0 : decisionMicros.getMean(),
        decisionMicros.getValueAtPercentile(50), decisionMicros.getValueAtPercentile(99),
        decisionMicros.getMaxValue(), fellBack);
    long[] totals = new long[5];
    long live = 0;
    long expired = 0;
    for (Replica replica : replicas) {
      long[] t = replica.ledger.totals();
      for (int i = 0; i < totals.length; i++) {
        totals[i] += t[i];
      }
      live += replica.ledger.liveReservations();
      expired += replica.ledger.expired();
    }
    VirtualOutcome.LedgerEnd ledgerEnd = new VirtualOutcome.LedgerEnd(totals[0], totals[1], totals[2], totals[3],
        totals[4], live, expired);
    // every replica follows the same streams: the event counters, media identities and footprint are replica 0's
    Replica first = replicas[0];
    VirtualOutcome.Truth truth = new VirtualOutcome.Truth(truthWithin, truthOver, truthUnder, predictedTokens,
        actualTokens);
    Map<String, Long> events = new TreeMap<>();
    long batches = 0;
    for (long d : delivered) {
      batches += d;
    }
    events.put("delivered_batches", batches);
    for (WorkerEventHealth.Snapshot s : first.health.snapshots()) {
      for (EventCounter c : List.of(EventCounter.DROPPED_BATCHES, EventCounter.GAPS, EventCounter.REPLAYS,
          EventCounter.STORED_BLOCKS, EventCounter.REMOVED_BLOCKS, EventCounter.UNKNOWN_PARENT,
          EventCounter.UNKNOWN_REMOVES, EventCounter.RESETS)) {
        events.merge(c.name().toLowerCase(java.util.Locale.ROOT), s.count(c), Long::sum);
      }
      // the jump search (on by default) trusts views to be prefix-closed: the simulated vLLM frees tail first
      events.merge("not_prefix_closed_workers", s.notPrefixClosed().isEmpty() ? 0L : 1L, Long::sum);
    }
    events.put("stale_transitions", first.staleTransitions);
    MediaIdentities media = first.index.media();
    if (media.expectedTotal() > 0) {
      // images sent without a uuid: what the router learned of the engines' identifiers (docs/request-path.md)
      events.put("media_expected", media.expectedTotal());
      events.put("media_learned", media.learnedTotal());
      events.put("media_used", media.usedTotal());
      events.put("media_conflicts", media.conflictsTotal());
      events.put("media_claimed", media.claimedTotal());
      events.put("media_evicted", media.evictedTotal());
    }
    List<String> notes = new ArrayList<>();
    notes.add(String.format(java.util.Locale.ROOT,
        "virtual time: %d workers %s, %d KV blocks each, block %d%s; events %s%s%s; truth check %.2f%% within one "
            + "block (%d over, %d under); ledger at end %s",
        setup.workers(), setup.preset().id(), setup.engineConfig(0).numGpuBlocks(), setup.blockSize(),
        replicas.length == 1 ? "" : ", " + replicas.length + " router replicas" + (setup.replicaSyncDelay() == null
            ? " sharing nothing" : " sharing reservations and predictions after " + setup.replicaSyncDelay()),
        setup.layout() == null ? "applied directly" : setup.layout().name().toLowerCase(java.util.Locale.ROOT),
        setup.replayBufferSteps() > 0 ? " with replay" : " without replay",
        setup.faults().equals(dev.kvrouter.examples.sim.events.EventFaults.NONE) ? "" : ", faults " + setup.faults(),
        truth.withinShare() * 100, truth.over(), truth.under(), ledgerEnd.zero() ? "zero" : ledgerEnd.toString()));
    if (!fallbacks.isEmpty()) {
      notes.add("fallbacks " + fallbacks);
    }
    if (media.expectedTotal() > 0) {
      notes.add(String.format(java.util.Locale.ROOT, "media identities: %d items expected without a uuid, %d engine "
          + "identifiers learned, used %d times, %d conflicts", media.expectedTotal(), media.learnedTotal(),
          media.usedTotal(), media.conflictsTotal()));
    }
    long encoded = 0;
    long inPrefix = 0;
    long encoderHits = 0;
    for (EngineStats s : stats) {
      encoded += s.media().encoderRuns();
      inPrefix += s.media().skippedByPrefix();
      encoderHits += s.media().encoderCacheHits();
    }
    if (encoded + inPrefix + encoderHits > 0) {
      // what the engines did with each image; only a preset with a vision tower charges the encoded ones time
      notes.add(String.format(java.util.Locale.ROOT, "images: %d encoded, %d found in the prefix cache, %d in the "
          + "encoder cache (%s)", encoded, inPrefix, encoderHits,
          setup.preset().vision() == null ? "timed as text: the preset has no vision tower" : "vision tower "
              + setup.preset().vision().name()));
    }
    // the engines generate the script by construction: there is no streamed answer to check
    Sessions sessions = chain.dependentTurns() == 0 ? null : Sessions.of(chain, workload.scriptsAnswers(),
        receivedShort.size(), receivedShort.values().stream().filter(t -> t == 0).count(), null);
    if (sessions != null) {
      notes.add(sessions.summary());
    }
    RunData data = new RunData(policy, names, list, itl, lastEndNanos / 1000, counters, samples,
        setup.sampleInterval().toNanos() / 1000, new RouterSnapshot(0, -1, -1),
        new RouterSnapshot(routerCpu, -1, -1), -1, overhead, maxInFlight, notes, sessions);
    double[] busy = new double[stats.size()];
    for (int i = 0; i < busy.length; i++) {
      busy[i] = lastEndNanos == 0 ? 0 : (double) stats.get(i).busyNanos() / lastEndNanos;
    }
    if (breakdown != null) {
      notes.add("miss breakdown: " + breakdown.summary());
    }
    double evictionShare = evictionShareDecisions == 0 ? 0 : evictionShareSum / evictionShareDecisions;
    notes.add(String.format(java.util.Locale.ROOT, "router's eviction share (mean over decisions) %.4f",
        evictionShare));
    return new VirtualOutcome(data, truth, ledgerEnd, wall, clock.nanoTime() / 1e9, routerCpu, fallbacks, events,
        first.index.footprintBytes(), busy, evictionShare, breakdown == null ? null : breakdown.toJson());
  }

  private long cpu() {
    return threads.getCurrentThreadCpuTime();
  }

  private static long micros(long nanos) {
    return nanos / 1000;
  }

  /** The virtual clock as a {@code java.time.Clock} for the index and the event plane. */
  private static final class VirtualJavaClock extends Clock {
    private final VirtualClock clock;

    VirtualJavaClock(VirtualClock clock) {
      this.clock = clock;
    }

    @Override
    public ZoneId getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
      return this;
    }

    @Override
    public long millis() {
      return (long) (clock.epochSeconds() * 1000);
    }

    @Override
    public Instant instant() {
      return Instant.ofEpochMilli(millis());
    }
  }
}
