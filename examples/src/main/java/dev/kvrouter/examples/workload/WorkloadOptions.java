package dev.kvrouter.examples.workload;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;

/**
 * String parameters of a workload with typed, defaulted reads. Every read records the effective value, so the
 * report holds the complete parameter set (defaults included) and a run can be rebuilt from it; keys nobody
 * read are rejected, so a typo never silently runs the default. Not thread-safe; one per build.
 */
public final class WorkloadOptions {

  private final Map<String, String> given;
  private final Map<String, Object> effective = new LinkedHashMap<>();

  public WorkloadOptions(Map<String, String> given) {
    Map<String, String> g = new LinkedHashMap<>();
    given.forEach((k, v) -> g.put(k.trim().toLowerCase(Locale.ROOT), v.trim()));
    this.given = g;
  }

  public static WorkloadOptions of(String... keyValues) {
    if (keyValues.length % 2 != 0) {
      throw new IllegalArgumentException("key/value pairs expected");
    }
    Map<String, String> m = new LinkedHashMap<>();
    for (int i = 0; i < keyValues.length; i += 2) {
      m.put(keyValues[i], keyValues[i + 1]);
    }
    return new WorkloadOptions(m);
  }

  public String string(String key, String def) {
    String v = given.getOrDefault(key, def);
    effective.put(key, v);
    return v;
  }

  public int intValue(String key, int def) {
    return record(key, parse(key, def, Integer::parseInt));
  }

  public long longValue(String key, long def) {
    return record(key, parse(key, def, Long::parseLong));
  }

  public double doubleValue(String key, double def) {
    return record(key, parse(key, def, Double::parseDouble));
  }

  /** A double in {@code [min, max]}. */
  public double fraction(String key, double def, double min, double max) {
    double v = doubleValue(key, def);
    if (!(v >= min && v <= max)) {
      throw new IllegalArgumentException(key + " must be in [" + min + ", " + max + "], was " + v);
    }
    return v;
  }

  public IntRange range(String key, IntRange def) {
    IntRange r = given.containsKey(key) ? IntRange.parse(given.get(key)) : def;
    effective.put(key, r.toString());
    return r;
  }

  public TokenSpace tokenSpace() {
    TokenSpace t = given.containsKey("vocab") ? TokenSpace.parse(given.get("vocab")) : TokenSpace.DEFAULT;
    effective.put("vocab", t.toString());
    return t;
  }

  /** {@code tokens} or {@code chat}: only {@link #format(Prompt.Format, boolean)} callers build Messages prompts. */
  public Prompt.Format format(Prompt.Format def) {
    return format(def, false);
  }

  public Prompt.Format format(Prompt.Format def, boolean messages) {
    Prompt.Format f = given.containsKey("format") ? Prompt.Format.parse(given.get("format")) : def;
    if (f == Prompt.Format.MESSAGES && !messages) {
      throw new IllegalArgumentException("format=messages is for multi-turn sessions only");
    }
    effective.put("format", f.name().toLowerCase(Locale.ROOT));
    return f;
  }

  public Arrival arrival() {
    Arrival a = given.containsKey("arrival") ? Arrival.parse(given.get("arrival")) : Arrival.POISSON;
    effective.put("arrival", a.name().toLowerCase(Locale.ROOT));
    return a;
  }

  /** Every parameter read so far with its effective value. */
  public Map<String, Object> effective() {
    return Collections.unmodifiableMap(effective);
  }

  /** Fails if a given key was never read: it is misspelled or belongs to another workload. */
  public void rejectUnknown(String workload) {
    List<String> unknown = new ArrayList<>();
    for (String k : given.keySet()) {
      if (!effective.containsKey(k)) {
        unknown.add(k);
      }
    }
    if (!unknown.isEmpty()) {
      throw new IllegalArgumentException("unknown option(s) " + unknown + " for workload " + workload
          + "; known: " + new TreeSet<>(effective.keySet()));
    }
  }

  private <T> T record(String key, T v) {
    effective.put(key, v);
    return v;
  }

  private <T> T parse(String key, T def, java.util.function.Function<String, T> f) {
    String v = given.get(key);
    if (v == null) {
      return def;
    }
    try {
      return f.apply(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("option " + key + ": not a number: " + v, e);
    }
  }
}
