package dev.kvrouter.examples.workload;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Builds workloads from one-line specs, {@code name[:key=value,key=value...]}, e.g.
 * {@code system-prompt:sharing=0.5,count=800} or {@code mooncake:block=64,max=500,speed=0.8}. A value written
 * {@code a|b|c} expands into one spec per value (a sweep): {@code system-prompt:sharing=0|0.3|0.6|0.9}.
 */
public final class WorkloadCatalog {

  private static final Map<String, Function<WorkloadOptions, Workload>> BUILDERS = new LinkedHashMap<>();

  static {
    BUILDERS.put(MooncakeReplay.NAME, MooncakeReplay::build);
    BUILDERS.put(SharedPrefixWorkload.NAME, SharedPrefixWorkload::build);
    BUILDERS.put(MultiTurnChatWorkload.NAME, MultiTurnChatWorkload::build);
    BUILDERS.put(RagWorkload.NAME, RagWorkload::build);
    BUILDERS.put(BestOfNWorkload.NAME, BestOfNWorkload::build);
    BUILDERS.put(UniqueWorkload.NAME, UniqueWorkload::build);
    BUILDERS.put(ImageQaWorkload.NAME, ImageQaWorkload::build);
  }

  private WorkloadCatalog() {}

  public static List<String> names() {
    return List.copyOf(BUILDERS.keySet());
  }

  /** Builds the workload of one spec (no sweep expansion). */
  public static Workload create(String spec) {
    int colon = spec.indexOf(':');
    String name = (colon < 0 ? spec : spec.substring(0, colon)).trim();
    return create(name, options(colon < 0 ? "" : spec.substring(colon + 1)));
  }

  public static Workload create(String name, Map<String, String> options) {
    Function<WorkloadOptions, Workload> b = BUILDERS.get(name);
    if (b == null) {
      throw new IllegalArgumentException("unknown workload " + name + "; known: " + names());
    }
    return b.apply(new WorkloadOptions(options));
  }

  /** Expands {@code a|b|c} values into one spec per combination, in order. */
  public static List<String> expand(String spec) {
    int colon = spec.indexOf(':');
    if (colon < 0) {
      return List.of(spec.trim());
    }
    List<String> specs = new ArrayList<>(List.of(""));
    for (Map.Entry<String, String> e : options(spec.substring(colon + 1)).entrySet()) {
      List<String> next = new ArrayList<>();
      for (String prefix : specs) {
        for (String v : e.getValue().split("\\|", -1)) {
          next.add(prefix + (prefix.isEmpty() ? "" : ",") + e.getKey() + "=" + v.trim());
        }
      }
      specs = next;
    }
    String name = spec.substring(0, colon).trim();
    return specs.stream().map(s -> s.isEmpty() ? name : name + ":" + s).toList();
  }

  /**
   * The option that scales a workload's load: {@code speed} for a trace replay (its timestamps are divided by
   * it), {@code rate} for every synthetic workload (requests, sessions or groups started per second).
   */
  public static String loadKnob(String spec) {
    return name(spec).equals(MooncakeReplay.NAME) ? "speed" : "rate";
  }

  /**
   * {@code spec} scaled to load knob value {@code value} ({@link #loadKnob}). A multi-turn workload also scales
   * its session count with its session rate, so sessions keep starting over the same window: the load then has a
   * steady middle instead of a burst of first turns followed by think time.
   */
  public static String withLoad(String spec, String value) {
    String knob = loadKnob(spec);
    if (!name(spec).equals(MultiTurnChatWorkload.NAME)) {
      return withOption(spec, knob, value);
    }
    Map<String, Object> base = create(spec).params();
    double rate = ((Number) base.get("rate")).doubleValue();
    int sessions = ((Number) base.get("sessions")).intValue();
    long scaled = Math.max(1, Math.round(sessions * Double.parseDouble(value) / rate));
    if (scaled > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("multi-turn: " + scaled + " sessions");
    }
    return withOption(withOption(spec, knob, value), "sessions", Long.toString(scaled));
  }

  /** The workload name of a spec. */
  public static String name(String spec) {
    int colon = spec.indexOf(':');
    return (colon < 0 ? spec : spec.substring(0, colon)).trim();
  }

  /** {@code spec} with option {@code key} set to {@code value} (replaced in place, or appended). */
  public static String withOption(String spec, String key, String value) {
    int colon = spec.indexOf(':');
    Map<String, String> m = options(colon < 0 ? "" : spec.substring(colon + 1));
    m.put(key, value);
    StringBuilder b = new StringBuilder(name(spec));
    String sep = ":";
    for (Map.Entry<String, String> e : m.entrySet()) {
      b.append(sep).append(e.getKey()).append('=').append(e.getValue());
      sep = ",";
    }
    return b.toString();
  }

  static Map<String, String> options(String s) {
    Map<String, String> m = new LinkedHashMap<>();
    for (String kv : s.split(",")) {
      if (kv.isBlank()) {
        continue;
      }
      int eq = kv.indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException("workload option must be key=value, was \"" + kv.trim() + "\"");
      }
      m.put(kv.substring(0, eq).trim(), kv.substring(eq + 1).trim());
    }
    return m;
  }
}
