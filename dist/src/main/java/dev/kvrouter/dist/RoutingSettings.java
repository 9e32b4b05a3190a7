package dev.kvrouter.dist;

import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import dev.kvrouter.extproc.routing.BusyThresholds;
import dev.kvrouter.extproc.routing.EvictionPressure;
import dev.kvrouter.extproc.routing.ModelRouting;
import dev.kvrouter.extproc.routing.RoutingConfig;
import dev.kvrouter.extproc.routing.StandardPolicies;
import dev.kvrouter.extproc.routing.Weights;
import java.lang.reflect.RecordComponent;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Predicate;

/**
 * Turns the {@code routing:} section of kvrouter.yaml into the router's {@link RoutingConfig}, and checks every
 * value on the way with its path. Per-model {@code weights} and {@code busy} maps take the same keys as the
 * global ones (and as {@code x-kvrouter-weights}) and override them key by key.
 */
final class RoutingSettings {

  /**
   * Output a request may be expected to produce at most (routing.load.max_expected_output_tokens): 2^24 tokens,
   * beyond any model's context window. An "uncapped" value reserved a client's max_tokens as it came, up to
   * Integer.MAX_VALUE blocks on one worker: a reservation no engine can hold that made the worker look full.
   */
  static final int MAX_OUTPUT_TOKENS = 1 << 24;

  static final List<String> BUSY_KEYS =
      List.of("max_prefill_tokens", "max_decode_blocks", "max_kv_usage", "max_waiting_requests", "when_all_busy");

  private static final PropertyNamingStrategies.NamingBase SNAKE =
      (PropertyNamingStrategies.NamingBase) PropertyNamingStrategies.SNAKE_CASE;

  private RoutingSettings() {}

  /**
   * Every problem in {@code r}, each prefixed with its path; empty when valid. A comparison of two settings is left
   * out when {@code removed} holds either path (its value was wrongly typed, reported and replaced by the default).
   */
  static List<String> validate(KvrouterConfig.Routing r, Predicate<String> removed) {
    List<String> errors = new ArrayList<>();
    if (!StandardPolicies.NAMES.contains(r.policy())) {
      errors.add("routing.policy: `" + r.policy() + "` must be one of " + StandardPolicies.NAMES);
    }
    Weights w = null;
    try {
      w = weights(r.weights());
    } catch (IllegalArgumentException e) {
      // Weights names only its first bad value: try each alone, as a per-model override would be
      for (RecordComponent c : KvrouterConfig.RoutingWeights.class.getRecordComponents()) {
        String key = SNAKE.translate(c.getName());
        try {
          Weights.DEFAULTS.with(key, String.valueOf(c.getAccessor().invoke(r.weights())));
        } catch (IllegalArgumentException ex) {
          errors.add("routing.weights." + key + ": " + ex.getMessage());
        } catch (ReflectiveOperationException ex) {
          throw new IllegalStateException(ex);
        }
      }
    }
    BusyThresholds busy = null;
    try {
      busy = busy(r.busy());
    } catch (IllegalArgumentException e) {
      errors.add("routing.busy: " + e.getMessage());
    }
    try {
      whenAllBusy(r.busy().whenAllBusy());
    } catch (IllegalArgumentException e) {
      errors.add("routing.busy.when_all_busy: " + e.getMessage());
    }
    var load = r.load();
    positive(errors, "routing.load.default_block_size", load.defaultBlockSize());
    nonNegative(errors, "routing.load.expected_output_tokens", load.expectedOutputTokens());
    if (load.maxExpectedOutputTokens() < 0 || load.maxExpectedOutputTokens() > MAX_OUTPUT_TOKENS) {
      errors.add("routing.load.max_expected_output_tokens: must be in [0, " + MAX_OUTPUT_TOKENS + "]");
    }
    positive(errors, "routing.load.reservation_ttl_seconds", load.reservationTtlSeconds());
    positive(errors, "routing.load.max_reservations", load.maxReservations());
    if (load.evictionSlots() < 1 || load.evictionSlots() > EvictionPressure.MAX_SLOTS) {
      errors.add("routing.load.eviction_slots: must be in [1, " + EvictionPressure.MAX_SLOTS + "]");
    }
    if (load.sweepIntervalMs() < 10) {
      errors.add("routing.load.sweep_interval_ms: must be >= 10");
    }
    var scrape = r.scrape();
    if (scrape.intervalMs() < 50) {
      errors.add("routing.scrape.interval_ms: must be >= 50");
    }
    positive(errors, "routing.scrape.timeout_ms", scrape.timeoutMs());
    positive(errors, "routing.scrape.max_age_ms", scrape.maxAgeMs());
    if (scrape.maxBytes() < 1024) {
      errors.add("routing.scrape.max_bytes: must be >= 1024");
    }
    nonNegative(errors, "routing.health.unreachable_after", r.health().unreachableAfter());
    nonNegative(errors, "routing.health.eject_after_errors", r.health().ejectAfterErrors());
    nonNegative(errors, "routing.health.eject_seconds", r.health().ejectSeconds());
    if (r.health().ejectMaxSeconds() < r.health().ejectSeconds() && !removed.test("routing.health.eject_seconds")
        && !removed.test("routing.health.eject_max_seconds")) {
      errors.add("routing.health.eject_max_seconds: must be >= eject_seconds (" + r.health().ejectSeconds() + ")");
    }
    positive(errors, "routing.decision_log.max_candidates", r.decisionLog().maxCandidates());
    if (w != null && busy != null) {
      for (Map.Entry<String, KvrouterConfig.ModelOverride> e : r.models().entrySet()) {
        String path = "routing.models." + e.getKey();
        KvrouterConfig.ModelOverride m = e.getValue();
        if (m == null) {
          continue;
        }
        if (m.policy() != null && !StandardPolicies.NAMES.contains(m.policy())) {
          errors.add(path + ".policy: `" + m.policy() + "` must be one of " + StandardPolicies.NAMES);
        }
        for (Map.Entry<String, Object> kv : m.weights().entrySet()) {
          try {
            modelWeight(w, kv.getKey(), kv.getValue());
          } catch (IllegalArgumentException ex) {
            errors.add(path + ".weights." + kv.getKey() + ": " + ex.getMessage());
          }
        }
        int before = errors.size();
        for (Map.Entry<String, Object> kv : m.busy().entrySet()) {
          try {
            busyValue(kv.getKey(), kv.getValue());
          } catch (IllegalArgumentException ex) {
            String key = BUSY_KEYS.contains(kv.getKey()) ? "." + kv.getKey() : "";
            errors.add(path + ".busy" + key + ": " + ex.getMessage());
          }
        }
        if (errors.size() == before) {
          try {
            modelBusy(busy, r.busy().whenAllBusy(), m.busy());
          } catch (IllegalArgumentException ex) {
            errors.add(path + ".busy: " + ex.getMessage());
          }
        }
      }
    }
    return errors;
  }

  /** The router's configuration; call after {@link #validate} found nothing. */
  static RoutingConfig toConfig(KvrouterConfig.Routing r) {
    Weights w = weights(r.weights());
    BusyThresholds busy = busy(r.busy());
    ModelRouting defaults = new ModelRouting(r.policy(), w, busy, whenAllBusy(r.busy().whenAllBusy()));
    Map<String, ModelRouting> models = new LinkedHashMap<>();
    for (Map.Entry<String, KvrouterConfig.ModelOverride> e : r.models().entrySet()) {
      KvrouterConfig.ModelOverride m = e.getValue();
      if (m == null) {
        continue;
      }
      Weights mw = w;
      for (Map.Entry<String, Object> kv : m.weights().entrySet()) {
        mw = modelWeight(mw, kv.getKey(), kv.getValue());
      }
      BusySettings mb = modelBusy(busy, r.busy().whenAllBusy(), m.busy());
      models.put(e.getKey(), new ModelRouting(m.policy() != null ? m.policy() : r.policy(), mw, mb.thresholds(),
          mb.whenAllBusy()));
    }
    var load = r.load();
    return new RoutingConfig(defaults, models, load.defaultBlockSize(), load.expectedOutputTokens(),
        load.maxExpectedOutputTokens());
  }

  /**
   * {@code w} with one of a model's weights, typed as strictly as the global {@code routing.weights}: a number for a
   * number (not a quoted one, not .inf or .nan), a boolean for {@code imbalance_gate} (not 1 or "on"). The map is
   * read untyped, and the header syntax {@link Weights#with(String, String)} takes would let all of those through.
   */
  static Weights modelWeight(Weights w, String key, Object value) {
    if (!Weights.KEYS.contains(key)) {
      // the header's parser trims and lower-cases keys; a file's keys are exact, as routing.weights' are
      throw new IllegalArgumentException("unknown weight `" + key + "` (known: " + String.join(", ", Weights.KEYS)
          + ")");
    }
    if (value == null) {
      return w; // `~` is unset, as everywhere in kvrouter.yaml: the global value stays
    }
    boolean gate = key.equals("imbalance_gate");
    if (gate && !(value instanceof Boolean)) {
      throw new IllegalArgumentException("must be true or false, was `" + value + "`");
    }
    if (!gate && !(value instanceof Number n && Double.isFinite(n.doubleValue()))) {
      throw new IllegalArgumentException("must be a finite number, was "
          + (value instanceof String ? "string \"" + value + "\"" : "`" + value + "`"));
    }
    return w.with(key, String.valueOf(value));
  }

  static Weights weights(KvrouterConfig.RoutingWeights c) {
    return new Weights(c.gpuCredit(), c.cpuCredit(), c.diskCredit(), c.predictedCredit(), c.overlapCreditDecay(),
        c.prefillLoadScale(), c.decodeLoadScale(), c.activeRequestWeight(), c.newPrefillWeight(),
        c.decodeReadWeight(), c.temperature(), c.imbalanceGate(), c.imbalanceAbs(), c.imbalanceRel(),
        c.newPrefillQueueWeight(), c.boundedLoad(), c.newPrefillEvictionWeight(), c.evictionShareFull(),
        c.hotPrefixRelief(), c.stepTokens(), c.newPrefillIdleRelief(), c.timePrefillUsPerToken(), c.timeStepUs(),
        c.timeStepUsPerKtoken());
  }

  static BusyThresholds busy(KvrouterConfig.Busy b) {
    return new BusyThresholds(b.maxPrefillTokens(), b.maxDecodeBlocks(), b.maxKvUsage(), b.maxWaitingRequests());
  }

  static ModelRouting.WhenAllBusy whenAllBusy(String s) {
    return switch (s.toLowerCase(Locale.ROOT)) {
      case "reject" -> ModelRouting.WhenAllBusy.REJECT;
      case "least_loaded" -> ModelRouting.WhenAllBusy.LEAST_LOADED;
      default -> throw new IllegalArgumentException("`" + s + "` must be reject or least_loaded");
    };
  }

  private record BusySettings(BusyThresholds thresholds, ModelRouting.WhenAllBusy whenAllBusy) {}

  /** The global thresholds with a model's overrides applied. */
  private static BusySettings modelBusy(BusyThresholds base, String baseWhen, Map<String, Object> o) {
    long prefill = base.maxPrefillTokens();
    long decode = base.maxDecodeBlocks();
    double kv = base.maxKvUsage();
    long waiting = base.maxWaiting();
    String when = baseWhen;
    for (Map.Entry<String, Object> e : o.entrySet()) {
      Object v = busyValue(e.getKey(), e.getValue());
      if (v == null) {
        continue;
      }
      switch (e.getKey()) {
        case "max_prefill_tokens" -> prefill = (Long) v;
        case "max_decode_blocks" -> decode = (Long) v;
        case "max_kv_usage" -> kv = (Double) v;
        case "max_waiting_requests" -> waiting = (Long) v;
        default -> when = (String) v;
      }
    }
    return new BusySettings(new BusyThresholds(prefill, decode, kv, waiting), whenAllBusy(when));
  }

  /**
   * One of a model's busy values, typed as strictly as the global {@code routing.busy} binds it: the map is read
   * untyped, and parsing its values' text took a quoted "8192" the global section refuses.
   */
  private static Object busyValue(String key, Object value) {
    if (value == null && BUSY_KEYS.contains(key)) {
      return null; // `~` is unset: the global value stays
    }
    switch (key) {
      case "max_prefill_tokens", "max_decode_blocks", "max_waiting_requests" -> {
        if (value instanceof Integer || value instanceof Long) {
          return ((Number) value).longValue();
        }
        throw new IllegalArgumentException("must be a whole number, was " + shown(value));
      }
      case "max_kv_usage" -> {
        if (value instanceof Number n && !(value instanceof java.math.BigInteger)
            && Double.isFinite(n.doubleValue())) {
          return n.doubleValue();
        }
        throw new IllegalArgumentException("must be a finite number, was " + shown(value));
      }
      case "when_all_busy" -> {
        if (value instanceof String w) {
          whenAllBusy(w);
          return w;
        }
        throw new IllegalArgumentException("must be reject or least_loaded, was " + shown(value));
      }
      default -> throw new IllegalArgumentException(
          "unknown key `" + key + "` (allowed: " + String.join(", ", BUSY_KEYS) + ")");
    }
  }

  private static String shown(Object value) {
    return value instanceof String ? "string \"" + value + "\"" : "`" + value + "`";
  }

  private static void positive(List<String> errors, String name, int v) {
    if (v <= 0) {
      errors.add(name + ": must be > 0");
    }
  }

  private static void nonNegative(List<String> errors, String name, int v) {
    if (v < 0) {
      errors.add(name + ": must be >= 0");
    }
  }
}
