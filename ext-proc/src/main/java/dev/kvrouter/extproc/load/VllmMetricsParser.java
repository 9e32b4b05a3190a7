package dev.kvrouter.extproc.load;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Reads the few load gauges the router needs out of an engine's Prometheus text exposition, fed in chunks as
 * they arrive, in bounded memory.
 *
 * <p>Understood series (others, including every histogram, are skipped after reading only their name):
 * vLLM {@code vllm:num_requests_running}, {@code vllm:num_requests_waiting}, {@code vllm:kv_cache_usage_perc}
 * (older {@code vllm:gpu_cache_usage_perc}), {@code vllm:cache_config_info{num_gpu_blocks,
 * enable_prefix_caching}}; SGLang {@code sglang:num_running_reqs}, {@code sglang:num_queue_reqs},
 * {@code sglang:token_usage}. Series are grouped by the {@code engine} label (vLLM's data-parallel rank); series without it go to engine -1. Several
 * series of one engine (one per served model name) add up; usage and capacity take the maximum. A sample that is
 * not a finite number (NaN, an infinity) is skipped, as is a malformed line.
 *
 * <p>Hand-written rather than a client library: the format is line-based, the router reads three gauges, and
 * this parser never materialises the rest of a page that is mostly histogram buckets. Not thread-safe: one
 * parser per scrape.
 */
public final class VllmMetricsParser {

  /** Lines longer than this are skipped (no gauge the router reads comes close). */
  static final int MAX_LINE = 16 * 1024;

  /** Accumulated gauges of one engine (data-parallel rank). NaN means not reported. */
  public static final class Engine {
    double running = Double.NaN;
    double waiting = Double.NaN;
    double kvUsage = Double.NaN;
    long numGpuBlocks;
    /** {@code vllm:cache_config_info{enable_prefix_caching}}; null when not reported; off wins over on. */
    Boolean prefixCaching;

    public double running() {
      return running;
    }

    public double waiting() {
      return waiting;
    }

    public double kvUsage() {
      return kvUsage;
    }

    public long numGpuBlocks() {
      return numGpuBlocks;
    }

    /** Whether the engine caches prefixes, as its cache config says; null when it does not say. */
    public Boolean prefixCaching() {
      return prefixCaching;
    }

    public boolean hasLoad() {
      return !Double.isNaN(running) || !Double.isNaN(waiting);
    }
  }

  private enum Kind { RUNNING, WAITING, USAGE, CONFIG }

  /** The series this parser reads, by sample name; also the families a scrape asks the engine for. */
  private static final Map<String, Kind> KINDS = Map.of(
      "vllm:num_requests_running", Kind.RUNNING,
      "sglang:num_running_reqs", Kind.RUNNING,
      "vllm:num_requests_waiting", Kind.WAITING,
      "sglang:num_queue_reqs", Kind.WAITING,
      "vllm:kv_cache_usage_perc", Kind.USAGE,
      "vllm:gpu_cache_usage_perc", Kind.USAGE,
      "sglang:token_usage", Kind.USAGE,
      "vllm:cache_config_info", Kind.CONFIG);

  /** Names of every series this parser reads, in a fixed order. */
  public static final List<String> SERIES = KINDS.keySet().stream().sorted().toList();
  /** The engine's cache config, which holds for its lifetime: read by a parser made to ({@code readConfig}). */
  public static final String CONFIG_SERIES = "vllm:cache_config_info";
  /** {@link #SERIES} without {@link #CONFIG_SERIES}: the load gauges, read on every scrape. */
  public static final List<String> LOAD_SERIES = SERIES.stream().filter(n -> !n.equals(CONFIG_SERIES)).toList();
  private static final int MIN_NAME = SERIES.stream().mapToInt(String::length).min().orElseThrow();
  private static final int MAX_NAME = SERIES.stream().mapToInt(String::length).max().orElseThrow();

  private final long maxBytes;
  private final byte[] line = new byte[MAX_LINE];
  private int lineLen;
  private boolean skippingLine;
  private long total;
  private boolean truncated;
  private final Map<Integer, Engine> engines = new TreeMap<>();
  private final boolean readConfig;

  /** @param maxBytes bytes read at most; the rest of a larger page is ignored ({@link #truncated()}) */
  public VllmMetricsParser(long maxBytes) {
    this(maxBytes, true);
  }

  /** @param readConfig whether {@link #CONFIG_SERIES} is read; without, its lines are skipped as unknown series */
  public VllmMetricsParser(long maxBytes, boolean readConfig) {
    this.maxBytes = maxBytes;
    this.readConfig = readConfig;
  }

  public void feed(byte[] b, int off, int len) {
    for (int i = off; i < off + len; i++) {
      if (total++ >= maxBytes) {
        truncated = true;
        return;
      }
      byte c = b[i];
      if (c == '\n') {
        if (!skippingLine) {
          parseLine();
        }
        lineLen = 0;
        skippingLine = false;
      } else if (!skippingLine) {
        if (lineLen == MAX_LINE) {
          skippingLine = true;
        } else {
          line[lineLen++] = c;
        }
      }
    }
  }

  public void feed(byte[] b) {
    feed(b, 0, b.length);
  }

  /** Call once after the last chunk; returns the engines seen, keyed by {@code engine} label (-1 = none). */
  public Map<Integer, Engine> finish() {
    if (!skippingLine && lineLen > 0 && !truncated) {
      parseLine();
    }
    lineLen = 0;
    return engines;
  }

  /** Bytes of the page fed so far, up to the cap. */
  public long bytesRead() {
    return Math.min(total, maxBytes);
  }

  public boolean truncated() {
    return truncated;
  }

  private void parseLine() {
    int n = lineLen;
    if (n == 0 || line[0] == '#') {
      return;
    }
    int nameEnd = 0;
    while (nameEnd < n && line[nameEnd] != '{' && line[nameEnd] != ' ' && line[nameEnd] != '\t') {
      nameEnd++;
    }
    Kind kind = kind(nameEnd);
    if (kind == null || kind == Kind.CONFIG && !readConfig) {
      return;
    }
    int engine = -1;
    long numGpuBlocks = 0;
    Boolean prefixCaching = null;
    int p = nameEnd;
    if (p < n && line[p] == '{') {
      p++;
      while (p < n && line[p] != '}') {
        int keyStart = p;
        while (p < n && line[p] != '=') {
          p++;
        }
        String key = new String(line, keyStart, p - keyStart, StandardCharsets.UTF_8).trim();
        p++; // '='
        if (p >= n || line[p] != '"') {
          return; // malformed
        }
        p++;
        StringBuilder v = new StringBuilder();
        while (p < n && line[p] != '"') {
          if (line[p] == '\\' && p + 1 < n) {
            p++;
            v.append(line[p] == 'n' ? '\n' : (char) line[p]);
          } else {
            v.append((char) line[p]);
          }
          p++;
        }
        if (p >= n) {
          return; // a quote never closed: the line ends inside a label value
        }
        p++; // closing quote
        if (key.equals("engine")) {
          engine = parseInt(v.toString(), -1);
        } else if (key.equals("num_gpu_blocks")) {
          numGpuBlocks = Math.max(0, parseInt(v.toString(), 0));
        } else if (key.equals("enable_prefix_caching")) {
          prefixCaching = parseBool(v.toString()); // Python's str(bool): True, False
        }
        while (p < n && (line[p] == ',' || line[p] == ' ')) {
          p++;
        }
      }
      if (p >= n) {
        return; // labels never closed
      }
      p++; // '}'
    }
    while (p < n && (line[p] == ' ' || line[p] == '\t')) {
      p++;
    }
    int valueStart = p;
    while (p < n && line[p] != ' ' && line[p] != '\t' && line[p] != '\r') {
      p++;
    }
    double value;
    try {
      value = Double.parseDouble(new String(line, valueStart, p - valueStart, StandardCharsets.US_ASCII));
    } catch (NumberFormatException e) {
      return;
    }
    if (kind != Kind.CONFIG && !Double.isFinite(value)) {
      // an engine (or one model name's series) not reporting: summed, it erased every other series' count
      return;
    }
    Engine e = engines.computeIfAbsent(engine, k -> new Engine());
    switch (kind) {
      case RUNNING -> e.running = Double.isNaN(e.running) ? value : e.running + value;
      case WAITING -> e.waiting = Double.isNaN(e.waiting) ? value : e.waiting + value;
      case USAGE -> e.kvUsage = Double.isNaN(e.kvUsage) ? value : Math.max(e.kvUsage, value);
      case CONFIG -> {
        e.numGpuBlocks = Math.max(e.numGpuBlocks, numGpuBlocks);
        if (prefixCaching != null && e.prefixCaching != Boolean.FALSE) {
          e.prefixCaching = prefixCaching;
        }
      }
    }
  }

  private Kind kind(int nameEnd) {
    if (nameEnd < MIN_NAME || nameEnd > MAX_NAME) {
      return null; // cheap reject: histogram series are longer than any wanted name
    }
    return KINDS.get(new String(line, 0, nameEnd, StandardCharsets.US_ASCII));
  }

  private static Boolean parseBool(String s) {
    String t = s.trim();
    return t.equalsIgnoreCase("true") ? Boolean.TRUE : t.equalsIgnoreCase("false") ? Boolean.FALSE : null;
  }

  private static int parseInt(String s, int dflt) {
    try {
      return Integer.parseInt(s.trim());
    } catch (NumberFormatException e) {
      return dflt;
    }
  }
}
