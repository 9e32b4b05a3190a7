package dev.kvrouter.dist;

import com.fasterxml.jackson.core.JsonStreamContext;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.exc.StreamReadException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.databind.cfg.CoercionAction;
import com.fasterxml.jackson.databind.cfg.CoercionInputShape;
import com.fasterxml.jackson.databind.type.LogicalType;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.kvrouter.extproc.model.ModelSpec;
import dev.kvrouter.extproc.model.ModelSpecs;
import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.extproc.server.ExtProcOptions;
import dev.kvrouter.extproc.routing.Weights;
import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.events.SubscriberConfig;
import dev.kvrouter.index.media.MediaIdentityConfig;
import dev.kvrouter.xds.registry.YamlSpellings;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;
import java.util.stream.Collectors;

/**
 * {@code kvrouter.yaml}: the one configuration file. Every field has a default (docs/configuration.md lists
 * them); unknown keys are errors; {@link #parse} reports every problem at once (keys and types found by
 * {@link ConfigTree}, then values), each with its path, before anything starts.
 */
public record KvrouterConfig(
    Server server,
    List<ModelSpec> models,
    Workers workers,
    Routing routing,
    Events events,
    Tenancy tenancy,
    Limits limits,
    Observability observability,
    Replicas replicas) {

  public KvrouterConfig {
    events = events == null ? new Events(null, null, null, null, 0, null, null, null, null, null, null, null) : events;
    server = server == null ? new Server(null, null, null, null, null, null, null) : server;
    models = models == null ? List.of() : java.util.Collections.unmodifiableList(new ArrayList<>(models));
    workers = workers == null ? new Workers(null, null) : workers;
    routing = routing == null ? new Routing(null, null, null, null, null, null, null, null) : routing;
    tenancy = tenancy == null ? new Tenancy(null, false, null, null, null, false) : tenancy;
    limits = limits == null ? new Limits(null, null, null, null) : limits;
    observability = observability == null ? new Observability(null, null, null) : observability;
    replicas = replicas == null ? new Replicas(null, null, null, null, null, null) : replicas;
  }

  /**
   * Several router replicas sharing what each has in flight: {@code bind} is where this one publishes its
   * reservations and predictions (empty: it shares nothing), {@code peers} the replicas' {@code bind} endpoints,
   * each name standing for every address it resolves to, looked up again every {@code resolveIntervalMs} (a
   * headless Service lists them all; this replica's own address is left out), docs/routing.md, "Several router
   * replicas"; {@code curve} the link's CURVE key pair, unset by default (plain ZMTP).
   */
  public record Replicas(String bind, List<String> peers, Integer peerTimeoutMs, Integer maxQueued,
      Integer resolveIntervalMs, Curve curve) {
    public Replicas {
      curve = curve == null ? new Curve(null, null) : curve;
      bind = bind == null ? "" : bind.trim();
      // not List.copyOf: a null element (`peers: [~]`) is reported by validate with its index, not thrown here
      peers = peers == null ? List.of() : Collections.unmodifiableList(new ArrayList<>(peers));
      // null is unset; a 0 written in the file is a value, and validated as one
      peerTimeoutMs = peerTimeoutMs == null ? 3000 : peerTimeoutMs;
      maxQueued = maxQueued == null ? 65536 : maxQueued;
      resolveIntervalMs = resolveIntervalMs == null ? 5000 : resolveIntervalMs;
    }
  }

  /**
   * The replica link's CURVE authentication and encryption (docs/operations.md, "Securing the replica link"): one key
   * pair for every member of the link, Z85 files as {@code curve_keygen} prints them, relative to kvrouter.yaml.
   *
   * @param secretKeyFile the link's secret key; unset (the default): no CURVE
   * @param publicKeyFile its public key, checked against the secret key at start (optional: derived from it)
   */
  public record Curve(String secretKeyFile, String publicKeyFile) {
    public boolean enabled() {
      return secretKeyFile != null;
    }
  }

  /**
   * Listening addresses and ports, and the drain on SIGTERM: for {@code drainMs} the ext_proc health reports
   * NOT_SERVING while the router still routes, so Envoy's health check takes it out of the router cluster (its
   * share moves to the other replicas) before its port closes.
   */
  public record Server(String bind, Integer extProcPort, Integer xdsPort, Integer adminPort, String requestBodyMode,
      Integer drainMs, Integer stallMs) {
    public Server {
      drainMs = drainMs == null ? 2000 : drainMs;
      stallMs = stallMs == null ? 2000 : stallMs;
      bind = bind == null ? "127.0.0.1" : bind;
      extProcPort = extProcPort == null ? 9002 : extProcPort;
      xdsPort = xdsPort == null ? 18000 : xdsPort;
      adminPort = adminPort == null ? 9090 : adminPort;
      requestBodyMode = requestBodyMode == null ? "BUFFERED" : requestBodyMode.toUpperCase(Locale.ROOT);
    }
  }

  /** Where the fleet comes from: a watched workers.yaml (relative paths resolve against kvrouter.yaml). */
  public record Workers(String file, Integer pollIntervalMs) {
    public Workers {
      file = file == null ? "workers.yaml" : file;
      pollIntervalMs = pollIntervalMs == null ? 500 : pollIntervalMs;
    }
  }

  /**
   * The {@code routing:} section: policy, cost-model weights, busy thresholds, load accounting, worker metrics
   * scraping, health, decision records, and per-model overrides. Every field defaults (docs/configuration.md);
   * {@link RoutingSettings} turns it into the router's {@code RoutingConfig} and validates it.
   */
  public record Routing(
      String policy,
      RoutingWeights weights,
      Busy busy,
      Load load,
      Scrape scrape,
      Health health,
      DecisionLog decisionLog,
      Map<String, ModelOverride> models) {
    public Routing {
      policy = policy == null ? "kv_aware" : policy;
      weights = weights == null ? new RoutingWeights(null, null, null, null, null, null, null, null, null, null,
          null, null, null, null, null, null, null, null, null, null, null, null, null, null) : weights;
      busy = busy == null ? new Busy(null, null, null, null, null) : busy;
      load = load == null ? new Load(null, null, null, null, null, null, null) : load;
      scrape = scrape == null ? new Scrape(null, null, null, null, null, null) : scrape;
      health = health == null ? new Health(null, null, null, null) : health;
      decisionLog = decisionLog == null ? new DecisionLog(null, null) : decisionLog;
      // `m: ~` is an override without keys (RoutingSettings skips it); Map.copyOf threw on it
      models = models == null ? Map.of() : Collections.unmodifiableMap(new LinkedHashMap<>(models));
    }
  }

  /** Cost-model weights and the imbalance gate (keys as in {@code x-kvrouter-weights}; Dynamo's defaults). */
  public record RoutingWeights(
      Double gpuCredit,
      Double cpuCredit,
      Double diskCredit,
      Double predictedCredit,
      Double overlapCreditDecay,
      Double prefillLoadScale,
      Double decodeLoadScale,
      Double activeRequestWeight,
      Double newPrefillWeight,
      Double decodeReadWeight,
      Double temperature,
      Boolean imbalanceGate,
      Double imbalanceAbs,
      Double imbalanceRel,
      Double newPrefillQueueWeight,
      Double boundedLoad,
      Double newPrefillEvictionWeight,
      Double evictionShareFull,
      Double hotPrefixRelief,
      Double stepTokens,
      Double newPrefillIdleRelief,
      Double timePrefillUsPerToken,
      Double timeStepUs,
      Double timeStepUsPerKtoken) {
    public RoutingWeights {
      // every default is Weights.DEFAULTS', read from there so the file and the code cannot disagree
      Weights d = Weights.DEFAULTS;
      gpuCredit = gpuCredit == null ? d.gpuCredit() : gpuCredit;
      cpuCredit = cpuCredit == null ? d.cpuCredit() : cpuCredit;
      diskCredit = diskCredit == null ? d.diskCredit() : diskCredit;
      predictedCredit = predictedCredit == null ? d.predictedCredit() : predictedCredit;
      overlapCreditDecay = overlapCreditDecay == null ? d.overlapCreditDecay() : overlapCreditDecay;
      prefillLoadScale = prefillLoadScale == null ? d.prefillLoadScale() : prefillLoadScale;
      decodeLoadScale = decodeLoadScale == null ? d.decodeLoadScale() : decodeLoadScale;
      activeRequestWeight = activeRequestWeight == null ? d.activeRequestWeight() : activeRequestWeight;
      newPrefillWeight = newPrefillWeight == null ? d.newPrefillWeight() : newPrefillWeight;
      decodeReadWeight = decodeReadWeight == null ? d.decodeReadWeight() : decodeReadWeight;
      temperature = temperature == null ? d.temperature() : temperature;
      imbalanceGate = imbalanceGate == null ? d.imbalanceGate() : imbalanceGate;
      imbalanceAbs = imbalanceAbs == null ? d.imbalanceAbs() : imbalanceAbs;
      imbalanceRel = imbalanceRel == null ? d.imbalanceRel() : imbalanceRel;
      newPrefillQueueWeight = newPrefillQueueWeight == null ? d.newPrefillQueueWeight() : newPrefillQueueWeight;
      boundedLoad = boundedLoad == null ? d.boundedLoad() : boundedLoad;
      newPrefillEvictionWeight = newPrefillEvictionWeight == null
          ? d.newPrefillEvictionWeight() : newPrefillEvictionWeight;
      evictionShareFull = evictionShareFull == null ? d.evictionShareFull() : evictionShareFull;
      hotPrefixRelief = hotPrefixRelief == null ? d.hotPrefixRelief() : hotPrefixRelief;
      stepTokens = stepTokens == null ? d.stepTokens() : stepTokens;
      newPrefillIdleRelief = newPrefillIdleRelief == null ? d.newPrefillIdleRelief() : newPrefillIdleRelief;
      timePrefillUsPerToken = timePrefillUsPerToken == null ? d.timePrefillUsPerToken() : timePrefillUsPerToken;
      timeStepUs = timeStepUs == null ? d.timeStepUs() : timeStepUs;
      timeStepUsPerKtoken = timeStepUsPerKtoken == null ? d.timeStepUsPerKtoken() : timeStepUsPerKtoken;
    }
  }

  /** Busy thresholds (0 = off) and what to do when every worker is busy ({@code reject} or {@code least_loaded}). */
  public record Busy(Long maxPrefillTokens, Long maxDecodeBlocks, Double maxKvUsage, Long maxWaitingRequests,
      String whenAllBusy) {
    public Busy {
      maxPrefillTokens = maxPrefillTokens == null ? 0L : maxPrefillTokens;
      maxDecodeBlocks = maxDecodeBlocks == null ? 0L : maxDecodeBlocks;
      maxKvUsage = maxKvUsage == null ? 0.0 : maxKvUsage;
      maxWaitingRequests = maxWaitingRequests == null ? 0L : maxWaitingRequests;
      whenAllBusy = whenAllBusy == null ? "reject" : whenAllBusy.toLowerCase(Locale.ROOT);
    }
  }

  /** The load ledger. */
  public record Load(Integer defaultBlockSize, Integer expectedOutputTokens, Integer maxExpectedOutputTokens,
      Integer reservationTtlSeconds, Integer maxReservations, Integer sweepIntervalMs, Integer evictionSlots) {
    public Load {
      defaultBlockSize = defaultBlockSize == null ? 16 : defaultBlockSize;
      expectedOutputTokens = expectedOutputTokens == null ? 256 : expectedOutputTokens;
      maxExpectedOutputTokens = maxExpectedOutputTokens == null ? 1024 : maxExpectedOutputTokens;
      reservationTtlSeconds = reservationTtlSeconds == null ? 300 : reservationTtlSeconds;
      maxReservations = maxReservations == null ? 100_000 : maxReservations;
      sweepIntervalMs = sweepIntervalMs == null ? 1000 : sweepIntervalMs;
      evictionSlots = evictionSlots == null ? Router.DEFAULT_EVICTION_SLOTS : evictionSlots;
    }
  }

  /** Worker metrics scraping ({@code Worker.effectiveMetricsUrl()}). */
  public record Scrape(Boolean enabled, Integer intervalMs, Integer timeoutMs, Integer maxAgeMs, Integer maxBytes,
      Boolean filter) {
    public Scrape {
      enabled = enabled == null || enabled;
      filter = filter == null || filter;
      intervalMs = intervalMs == null ? 250 : intervalMs;
      timeoutMs = timeoutMs == null ? 1000 : timeoutMs;
      maxAgeMs = maxAgeMs == null ? 2000 : maxAgeMs;
      maxBytes = maxBytes == null ? 8 * 1024 * 1024 : maxBytes;
    }
  }

  /** When the router stops sending a worker new requests (0 disables a signal). */
  public record Health(Integer unreachableAfter, Integer ejectAfterErrors, Integer ejectSeconds,
      Integer ejectMaxSeconds) {
    public Health {
      unreachableAfter = unreachableAfter == null ? 3 : unreachableAfter;
      ejectAfterErrors = ejectAfterErrors == null ? 5 : ejectAfterErrors;
      ejectSeconds = ejectSeconds == null ? 5 : ejectSeconds;
      ejectMaxSeconds = ejectMaxSeconds == null ? Math.max(60, ejectSeconds) : ejectMaxSeconds;
    }
  }

  /** Decision records on the {@code kvrouter.decisions} logger. */
  public record DecisionLog(Boolean enabled, Integer maxCandidates) {
    public DecisionLog {
      enabled = enabled == null || enabled;
      maxCandidates = maxCandidates == null ? 16 : maxCandidates;
    }
  }

  /**
   * Settings for one model (by requested model or adapter name, or by base model): any subset of the global
   * {@code policy}, {@code weights} keys and {@code busy} keys; the rest is inherited from the global values.
   */
  public record ModelOverride(String policy, Map<String, Object> weights, Map<String, Object> busy) {
    public ModelOverride {
      weights = weights == null ? Map.of() : Collections.unmodifiableMap(new LinkedHashMap<>(weights));
      busy = busy == null ? Map.of() : Collections.unmodifiableMap(new LinkedHashMap<>(busy));
    }
  }

  /**
   * Tenant identity and cache isolation (docs/request-path.md, "Tenancy").
   *
   * @param header the trusted header Envoy sets after authentication (and strips from clients)
   * @param shareAcrossTenants false (default): each tenant gets its own cache identity; true: tenants share it.
   *     Models may override it ({@code models[].tenancy.share_across_tenants})
   * @param secretFile file holding the secret that keys effective salts (HMAC-SHA256), relative to
   *     kvrouter.yaml; without a secret a public seed is used
   * @param secretEnv environment variable holding that secret, instead of a file
   * @param passThroughPaths POST paths the router does not route that a request with a tenant may still reach the
   *     engine on, unsalted; a tenant's POST to any other such path is refused (docs/request-path.md, "Tenancy")
   * @param saltMessagesApi route and salt a tenant's {@code /v1/messages} like chat (every worker's vLLM declares
   *     {@code cache_salt} on its Anthropic request model); false (default): refuse it with 404
   */
  public record Tenancy(String header, boolean shareAcrossTenants, String secretFile, String secretEnv,
      List<String> passThroughPaths, boolean saltMessagesApi) {
    public Tenancy {
      header = header == null ? "x-tenant-id" : header.toLowerCase(Locale.ROOT);
      passThroughPaths = passThroughPaths == null ? ExtProcOptions.DEFAULT_TENANT_PASS_THROUGH_PATHS
          : Collections.unmodifiableList(new ArrayList<>(passThroughPaths));
    }
  }

  /**
   * The KV event plane and index: where the router's picture of each worker's cache comes from.
   *
   * @param enabled follow workers' KV events (workers without an {@code events} endpoint are routed with the
   *     router's own predicted entries either way)
   * @param maxIndexEntries bound on (worker, block) residencies kept; beyond it each worker keeps a fair share
   * @param predictedTtlMs how long a routing decision counts as cached on a worker that publishes events (covers
   *     requests arriving before the engine's first events of a new prefix)
   * @param approximateTtlMs how long it counts on a worker without events (approximate mode)
   * @param subscriberThreads threads receiving and applying events (each worker's events on one thread, in order)
   * @param staleRecoveryMs a stale worker view is trusted again after this long without new trouble (0 = only
   *     after a replay, a clear or a restart)
   * @param earlyStop stop tokenizing once no worker can hold the next block (default true)
   * @param prefixJump N >= 2 (default 16): jump search with stride N, which trusts each worker's cached blocks to be
   *     prefix-closed (vLLM and SGLang evict leaf first) and still walks workers whose view may have holes (stale,
   *     lost events, evicted by the router, CPU/disk blocks) or whose events show their engine is not prefix-closed;
   *     0: every lookup walks a request's blocks one by one
   * @param walkModels models whose workers are always walked (engines known to evict a block before its children
   *     without a detectable signature)
   * @param mediaIdentities learning the engine's identifier of media sent without a uuid from its KV events
   * @param staleViewTrust credit a stale view as far as the workers' usage reports confirm it, before
   *     {@code staleRecoveryMs} (default true; false: a stale view earns nothing until it recovers)
   * @param maxMessageBytes largest KV event message read from an engine (default 16 MiB); a larger one is dropped
   *     with its connection, counted, and lost as after a gap
   */
  public record Events(Boolean enabled, Long maxIndexEntries, Integer predictedTtlMs, Integer approximateTtlMs,
      int subscriberThreads, Integer staleRecoveryMs, Boolean earlyStop, Integer prefixJump, List<String> walkModels,
      MediaIdentities mediaIdentities, Boolean staleViewTrust, Integer maxMessageBytes) {
    public Events {
      maxMessageBytes = maxMessageBytes == null ? SubscriberConfig.DEFAULT_MAX_MESSAGE_BYTES : maxMessageBytes;
      staleViewTrust = staleViewTrust == null || staleViewTrust;
      mediaIdentities = mediaIdentities == null ? new MediaIdentities(null, null, null, null, null) : mediaIdentities;
      prefixJump = prefixJump == null ? IndexConfig.DEFAULT_JUMP : prefixJump;
      walkModels = walkModels == null ? List.of() : Collections.unmodifiableList(new ArrayList<>(walkModels));
      enabled = enabled == null || enabled;
      maxIndexEntries = maxIndexEntries == null ? 8_000_000L : maxIndexEntries;
      predictedTtlMs = predictedTtlMs == null ? 5_000 : predictedTtlMs;
      approximateTtlMs = approximateTtlMs == null ? 120_000 : approximateTtlMs;
      // 0 is documented as "as many as the cores allow, up to 4", the one setting where it stands for a default
      subscriberThreads = subscriberThreads == 0 ? Math.max(1, Math.min(4,
          Runtime.getRuntime().availableProcessors())) : subscriberThreads;
      // Unset means the default; 0 is a setting of its own (no timed recovery), so it may not stand for unset.
      staleRecoveryMs = staleRecoveryMs == null ? 60_000 : staleRecoveryMs;
      earlyStop = earlyStop == null || earlyStop;
    }
  }

  /**
   * {@code events.media_identities}: engine identifiers of media sent without a uuid, learned from the workers'
   * stores (docs/request-path.md, "Multimodal identity"). Defaults: {@link MediaIdentityConfig#defaults()}.
   *
   * @param enabled learn at all (default true)
   * @param maxLearned learned identifiers kept, per router (all namespaces together)
   * @param learnedTtlMs a learned identifier is forgotten this long after it was learned
   * @param maxPending (worker, parent block) slots of routed items awaiting their worker's store
   * @param pendingTtlMs how long a routed item awaits its store
   */
  public record MediaIdentities(Boolean enabled, Integer maxLearned, Long learnedTtlMs, Integer maxPending,
      Long pendingTtlMs) {
    public MediaIdentities {
      MediaIdentityConfig d = MediaIdentityConfig.defaults();
      enabled = enabled == null || enabled;
      maxLearned = maxLearned == null ? d.maxLearned() : maxLearned;
      learnedTtlMs = learnedTtlMs == null ? d.learnedTtl().toMillis() : learnedTtlMs;
      maxPending = maxPending == null ? d.maxPending() : maxPending;
      pendingTtlMs = pendingTtlMs == null ? d.pendingTtl().toMillis() : pendingTtlMs;
    }

    /** The index's form; call after {@link KvrouterConfig#validate}. */
    public MediaIdentityConfig toConfig() {
      return new MediaIdentityConfig(enabled, maxLearned, Duration.ofMillis(learnedTtlMs), maxPending,
          Duration.ofMillis(pendingTtlMs));
    }

    void validate(List<String> errors) {
      String at = "events.media_identities.";
      if (maxLearned < 1 || maxLearned > 10_000_000) {
        errors.add(at + "max_learned: must be 1..10000000, was " + maxLearned);
      }
      if (maxPending < 1 || maxPending > 10_000_000) {
        errors.add(at + "max_pending: must be 1..10000000, was " + maxPending);
      }
      if (learnedTtlMs < 1000) {
        errors.add(at + "learned_ttl_ms: must be >= 1000, was " + learnedTtlMs);
      }
      if (pendingTtlMs < 100 || pendingTtlMs > 600_000) {
        errors.add(at + "pending_ttl_ms: must be 100..600000, was " + pendingTtlMs);
      }
    }
  }

  /** Bounds that protect the router. */
  /**
   * Request size limits. {@code maxBufferedBodyBytes}: the request bodies all streams may hold at once; null (the
   * default) is a quarter of the JVM's maximum heap, resolved at start ({@link #bufferedBodyBudget}).
   * {@code maxStopStrings}: the workers' {@code VLLM_MAX_STOP_STRINGS}, vLLM's default (4) unless set.
   */
  public record Limits(Integer maxBodyBytes, Integer retryAfterSeconds, Long maxBufferedBodyBytes,
      Integer maxStopStrings) {
    public Limits {
      maxBodyBytes = maxBodyBytes == null ? 8 * 1024 * 1024 : maxBodyBytes;
      retryAfterSeconds = retryAfterSeconds == null ? 1 : retryAfterSeconds;
      maxStopStrings = maxStopStrings == null ? dev.kvrouter.extproc.request.RequestBodyParser.DEFAULT_MAX_STOP_STRINGS : maxStopStrings;
    }

    /** The budget in bytes: as configured, or a quarter of {@code maxHeapBytes}, never under one body. */
    public long bufferedBodyBudget(long maxHeapBytes) {
      return maxBufferedBodyBytes != null ? maxBufferedBodyBytes : Math.max(maxBodyBytes, maxHeapBytes / 4);
    }
  }

  /**
   * Logs ({@code log_format: json}, the default, writes one JSON object per line), and how closely responses are watched: {@code truthCheckEvery} streamed responses in N are followed to
   * their last chunk for the truth check (usage); the rest are left after the first (docs/ext-proc.md).
   */
  public record Observability(String logFormat, String logLevel, Integer truthCheckEvery) {
    public Observability {
      logFormat = logFormat == null ? "json" : logFormat.toLowerCase(Locale.ROOT);
      logLevel = logLevel == null ? "info" : logLevel.toLowerCase(Locale.ROOT);
      truthCheckEvery = truthCheckEvery == null ? ExtProcOptions.DEFAULT_TRUTH_CHECK_EVERY : truthCheckEvery;
    }
  }

  /** Thrown with every configuration problem, one per line. */
  public static final class InvalidConfig extends IllegalArgumentException {
    public InvalidConfig(String message) {
      super(message);
    }
  }

  /**
   * Strict on purpose: a repeated key would silently replace the first (a second {@code events:} section drops every
   * setting of the first), and a fraction or a quoted value for a number or switch would be truncated or guessed at
   * ({@code 9002.9} became port 9002), and so would a number YAML 1.1 reads in another base ({@code 0x1F40}, checked
   * by {@link YamlSpellings}). Each of these is a typo the file's author should hear about.
   */
  /** RFC 9110's token, lower-cased as the header is: what an HTTP field name may be. */
  private static final java.util.regex.Pattern HTTP_TOKEN = java.util.regex.Pattern.compile("[!#$%&'*+.^_`|~0-9a-z-]+");
  private static final ObjectMapper YAML = strict(new ObjectMapper(YAMLFactory.builder()
      .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build()));

  private static ObjectMapper strict(ObjectMapper m) {
    m.setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
        .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
        .disable(DeserializationFeature.ACCEPT_FLOAT_AS_INT);
    for (LogicalType t : new LogicalType[] {LogicalType.Integer, LogicalType.Float, LogicalType.Boolean}) {
      m.coercionConfigFor(t)
          .setCoercion(CoercionInputShape.String, CoercionAction.Fail)
          .setCoercion(CoercionInputShape.EmptyString, CoercionAction.Fail);
    }
    m.coercionConfigFor(LogicalType.Boolean).setCoercion(CoercionInputShape.Integer, CoercionAction.Fail);
    return m;
  }

  public static KvrouterConfig defaults() {
    return new KvrouterConfig(null, null, null, null, null, null, null, null, null);
  }

  public static KvrouterConfig load(Path file) throws IOException {
    return parse(Files.readString(file), file.toString());
  }

  public static KvrouterConfig parse(String yaml, String source) {
    // how numbers were spelled is gone once read: 0x1F40 would be port 8000 (the same check as workers.yaml's)
    List<String> errors = new ArrayList<>(YamlSpellings.check(YAML.getFactory(), yaml));
    JsonNode tree;
    try {
      tree = YAML.readTree(yaml);
    } catch (StreamReadException e) {
      throw invalid(source, errors, List.of(path(e) + ": " + ConfigTree.explain(e.getOriginalMessage(),
          e.getLocation())));
    } catch (IOException e) {
      throw new InvalidConfig(source + ": not valid YAML: " + e.getMessage());
    }
    if (tree == null || tree.isMissingNode() || tree.isNull()) {
      tree = YAML.createObjectNode(); // empty, or only comments: every default
    }
    Set<String> removed = new HashSet<>();
    errors.addAll(ConfigTree.prune(YAML, tree, KvrouterConfig.class, removed));
    if (!tree.isObject()) {
      throw invalid(source, errors, List.of());
    }
    KvrouterConfig c;
    try {
      c = YAML.treeToValue(tree, KvrouterConfig.class);
    } catch (JsonMappingException e) {
      // what the walk did not foresee: reported as binding sees it
      throw invalid(source, errors, List.of(path(e) + ": " + ConfigTree.explain(e.getOriginalMessage(), null)));
    } catch (IOException e) {
      throw invalid(source, errors, List.of(String.valueOf(e.getMessage())));
    }
    errors.addAll(c.problems(removed::contains));
    if (!errors.isEmpty()) {
      throw invalid(source, errors, List.of());
    }
    return c;
  }

  private static InvalidConfig invalid(String source, List<String> first, List<String> then) {
    return new InvalidConfig(java.util.stream.Stream.concat(first.stream(), then.stream())
        .map(e -> source + ": " + e).collect(Collectors.joining("\n")));
  }

  /**
   * A repeated key at the top level reaches here unwrapped, without a reference path; the parser's context names
   * the mapping that holds it (its own current name is the repeated key, which the message gives).
   */
  private static String path(StreamReadException e) {
    JsonStreamContext c = e.getProcessor() == null ? null : e.getProcessor().getParsingContext();
    String p = c == null ? "" : YamlSpellings.path(c.getParent());
    return p.isEmpty() ? "(top level)" : p;
  }

  private static String path(JsonMappingException e) {
    String p = e.getPath().stream()
        .map(r -> r.getFieldName() != null ? r.getFieldName() : "[" + r.getIndex() + "]")
        .collect(Collectors.joining(".")).replace(".[", "[");
    return p.isEmpty() ? "(top level)" : p;
  }

  /** Checks every value; throws {@link InvalidConfig} listing all problems. */
  public void validate(String source) {
    List<String> errors = problems(path -> false);
    if (!errors.isEmpty()) {
      throw invalid(source, errors, List.of());
    }
  }

  /**
   * Every value's problem, each with its path; empty when valid. A check comparing two settings is left out when
   * {@code removed} holds either: a removed value (already reported) stands at its default, which the file never
   * said.
   */
  private List<String> problems(Predicate<String> removed) {
    List<String> errors = new ArrayList<>();
    if (server.bind().isBlank()) {
      errors.add("server.bind: must be an address (127.0.0.1, 0.0.0.0, ::, a host name)");
    }
    port(errors, "server.ext_proc_port", server.extProcPort());
    port(errors, "server.xds_port", server.xdsPort());
    port(errors, "server.admin_port", server.adminPort());
    if (server.stallMs() < 0 || server.stallMs() > 600_000) {
      errors.add("server.stall_ms: must be in [0, 600000] (milliseconds a request may wait for a routing thread "
          + "before the ext_proc health reports NOT_SERVING; 0: never), was " + server.stallMs());
    }
    if (server.drainMs() < 0 || server.drainMs() > 60_000) {
      errors.add("server.drain_ms: must be in [0, 60000] (milliseconds the router reports NOT_SERVING before it "
          + "stops on SIGTERM), was " + server.drainMs());
    }
    try {
      BodySendMode m = BodySendMode.valueOf(server.requestBodyMode());
      if (m != BodySendMode.BUFFERED && m != BodySendMode.FULL_DUPLEX_STREAMED) {
        errors.add("server.request_body_mode: must be BUFFERED or FULL_DUPLEX_STREAMED");
      }
    } catch (IllegalArgumentException e) {
      errors.add("server.request_body_mode: `" + server.requestBodyMode()
          + "` must be BUFFERED or FULL_DUPLEX_STREAMED");
    }
    ModelSpecs.validate(models).forEach(errors::add);
    if (!HTTP_TOKEN.matcher(tenancy.header()).matches()) {
      // a name no request can carry (a space, a colon, a pseudo-header) would leave every tenant unseparated
      errors.add("tenancy.header: `" + tenancy.header() + "` must be an HTTP header name (letters, digits and "
          + "!#$%&'*+-.^_`|~)");
    }
    if (tenancy.secretFile() != null && tenancy.secretEnv() != null) {
      errors.add("tenancy: set secret_file or secret_env, not both");
    }
    for (int i = 0; i < tenancy.passThroughPaths().size(); i++) {
      String why = ExtProcOptions.passThroughPathError(tenancy.passThroughPaths().get(i));
      if (why != null) {
        errors.add("tenancy.pass_through_paths[" + i + "]: " + why);
      }
    }
    if (workers.pollIntervalMs() < 50) {
      errors.add("workers.poll_interval_ms: must be >= 50, was " + workers.pollIntervalMs());
    }
    errors.addAll(RoutingSettings.validate(routing, removed));
    if (events.maxIndexEntries() < 1024) {
      errors.add("events.max_index_entries: must be >= 1024, was " + events.maxIndexEntries());
    }
    if (events.predictedTtlMs() < 1) {
      errors.add("events.predicted_ttl_ms: must be >= 1, was " + events.predictedTtlMs());
    }
    if (events.approximateTtlMs() < 1) {
      errors.add("events.approximate_ttl_ms: must be >= 1, was " + events.approximateTtlMs());
    }
    if (events.staleRecoveryMs() < 0) {
      errors.add("events.stale_recovery_ms: must be >= 0 (0: only an explicit recovery), was "
          + events.staleRecoveryMs());
    }
    if (events.prefixJump() < 0 || events.prefixJump() == 1 || events.prefixJump() > IndexConfig.MAX_JUMP) {
      errors.add("events.prefix_jump: must be 0 (exact walk) or 2.." + IndexConfig.MAX_JUMP + " (jump search"
          + " stride; default " + IndexConfig.DEFAULT_JUMP + "), was " + events.prefixJump());
    }
    for (int i = 0; i < events.walkModels().size(); i++) {
      String m = events.walkModels().get(i);
      if (m == null || m.isBlank()) {
        errors.add("events.walk_models[" + i + "]: must be a model name");
      }
    }
    events.mediaIdentities().validate(errors);
    if (events.maxMessageBytes() < 65_536) {
      errors.add("events.max_message_bytes: must be >= 65536 (the largest KV event message read from an engine),"
          + " was " + events.maxMessageBytes());
    }
    if (events.subscriberThreads() < 1 || events.subscriberThreads() > 64) {
      errors.add("events.subscriber_threads: must be 1..64");
    }
    if (limits.maxBufferedBodyBytes() != null && limits.maxBufferedBodyBytes() < limits.maxBodyBytes()) {
      errors.add("limits.max_buffered_body_bytes: must be >= limits.max_body_bytes (" + limits.maxBodyBytes()
          + "), was " + limits.maxBufferedBodyBytes());
    }
    if (limits.maxBodyBytes() < 1024) {
      errors.add("limits.max_body_bytes: must be >= 1024, was " + limits.maxBodyBytes());
    }
    if (limits.retryAfterSeconds() < 1) {
      errors.add("limits.retry_after_seconds: must be >= 1, was " + limits.retryAfterSeconds());
    }
    if (limits.maxStopStrings() < 0) {
      errors.add("limits.max_stop_strings: must be >= 0, was " + limits.maxStopStrings());
    }
    if (!observability.logFormat().equals("json") && !observability.logFormat().equals("text")) {
      errors.add("observability.log_format: must be json or text");
    }
    if (!List.of("trace", "debug", "info", "warn", "error").contains(observability.logLevel())) {
      errors.add("observability.log_level: must be one of trace, debug, info, warn, error");
    }
    if (observability.truthCheckEvery() < 0) {
      errors.add("observability.truth_check_every: must be >= 0 (1: every streamed response, 0: none)");
    }
    java.util.regex.Pattern zmq = java.util.regex.Pattern.compile("tcp://[^:/\\s]+:(\\d+|\\*)");
    if (!replicas.bind().isEmpty() && !zmq.matcher(replicas.bind()).matches()) {
      errors.add("replicas.bind: must be tcp://<host>:<port>, e.g. tcp://0.0.0.0:5601 (empty: share nothing)");
    } else {
      zmqPort(errors, "replicas.bind", zmq, replicas.bind());
    }
    for (int i = 0; i < replicas.peers().size(); i++) {
      String peer = replicas.peers().get(i);
      if (peer == null || !zmq.matcher(peer).matches() || peer.endsWith(":*")) {
        errors.add("replicas.peers[" + i + "]: must be tcp://<host>:<port> (another replica's replicas.bind)");
      } else {
        zmqPort(errors, "replicas.peers[" + i + "]", zmq, peer);
      }
    }
    if (replicas.bind().isEmpty() && !replicas.peers().isEmpty() && !removed.test("replicas.bind")) {
      errors.add("replicas.peers: set replicas.bind too (the others follow this replica there)");
    }
    if (replicas.peerTimeoutMs() < 1500) {
      errors.add("replicas.peer_timeout_ms: must be >= 1500 (replicas heartbeat every second)");
    }
    if (replicas.resolveIntervalMs() < 500) {
      errors.add("replicas.resolve_interval_ms: must be >= 500 (how often the peers' names are looked up again)");
    }
    if (replicas.maxQueued() < 1024) {
      errors.add("replicas.max_queued: must be >= 1024");
    }
    Curve curve = replicas.curve();
    if (curve.publicKeyFile() != null && curve.secretKeyFile() == null) {
      errors.add("replicas.curve.public_key_file: set replicas.curve.secret_key_file too (the link's secret key)");
    }
    if (curve.enabled() && replicas.bind().isEmpty() && !removed.test("replicas.bind")) {
      errors.add("replicas.curve: set replicas.bind too (CURVE secures the replica link, which is off without it)");
    }
    return errors;
  }

  /** The port of an endpoint {@code zmq} matched, unless {@code *}: the pattern takes any digits. */
  private static void zmqPort(List<String> errors, String name, java.util.regex.Pattern zmq, String endpoint) {
    java.util.regex.Matcher m = zmq.matcher(endpoint);
    if (!m.matches() || m.group(1).equals("*")) {
      return;
    }
    long port = m.group(1).length() > 18 ? Long.MAX_VALUE : Long.parseLong(m.group(1));
    if (port < 1 || port > 65535) {
      errors.add(name + ": port must be 1..65535, was " + m.group(1));
    }
  }

  private static void port(List<String> errors, String name, int p) {
    if (p < 1 || p > 65535) {
      errors.add(name + ": must be 1..65535, was " + p);
    }
  }
}
