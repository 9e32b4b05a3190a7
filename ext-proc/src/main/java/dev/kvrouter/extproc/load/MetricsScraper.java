package dev.kvrouter.extproc.load;

import dev.kvrouter.index.WorkerId;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import dev.kvrouter.xds.registry.WorkerSet;
import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.Proxy;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Scrapes every worker's Prometheus endpoint ({@link Worker#effectiveMetricsUrl()}) on a short interval and
 * keeps the latest {@link ScrapedLoad} per cache owner, for {@link LoadTracker} to blend with the ledger.
 *
 * <p>Each tick starts one asynchronous GET per worker that has none in flight (a slow worker never delays the
 * others, and never gets a pile of requests); a request older than the timeout is cancelled and counts as
 * unreachable. Bodies are parsed as they stream in ({@link VllmMetricsParser}), at most {@code maxBytes} each.
 * With {@code filter}, each request asks for the few series the parser reads ({@link #filteredUri}): a vLLM page
 * is mostly histograms, tens of kilobytes per engine, rendered by the engine's API server on every scrape.
 * Reaching a worker, or not, is reported to {@link WorkerHealth}; a worker that answers with an error status, or
 * with a page the parser fails on, exposes no metrics and is routed on the ledger alone (logged once).
 *
 * <p>Threads: the tick runs on the caller's scheduler and only starts requests. Each request is a blocking
 * {@link HttpURLConnection} on a pooled thread (one per worker being scraped at that moment, reused from round to
 * round), which also parses the body as it reads it; the JDK keeps the connection alive between rounds. Not
 * {@code java.net.http.HttpClient}: the same CPU per scrape once compiled (ScrapeCostBench, BENCHMARKS.md), but a
 * selector thread and an executor besides the senders, a request timeout that covers the headers only, and a
 * {@code sendAsync} that started a thread per response on a 2-CPU machine. Published results are immutable records in a
 * concurrent map.
 */
public final class MetricsScraper implements ScrapedLoadSource, AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(MetricsScraper.class);

  private final WorkerRegistry registry;
  private final LoadLedger ledger;
  private final WorkerHealth health;
  private final LongSupplier nanoClock;
  private final Duration timeout;
  private final long maxBytes;
  /** Threads blocked in a request, one per worker being scraped; idle ones wait a minute for the next round. */
  private final ExecutorService senders;
  private final ConcurrentHashMap<WorkerId, ScrapedLoad> latest = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, State> states = new ConcurrentHashMap<>();
  private final LongAdder ok = new LongAdder();
  private final LongAdder failed = new LongAdder();
  private final LongAdder noMetrics = new LongAdder();
  private final LongAdder bytes = new LongAdder();
  private final boolean filter;
  private ScheduledFuture<?> task;
  private volatile boolean closed;

  private static final class State {
    CompletableFuture<?> inFlight;
    long startedNanos;
    boolean warnedNoMetrics;
    boolean warnedPrefixCachingOff;
    /** Left the fleet: what its last scrape finds says nothing about a worker the router still routes to. */
    volatile boolean departed;
    /** Set once the server has not answered a filtered request usefully; read by the next round's sender. */
    volatile boolean wholePage;
    /**
     * Its engines' cache config ({@link VllmMetricsParser#CONFIG_SERIES}) by {@code engine} label, as read once per
     * engine lifetime; null until read, and again after any round that did not read the page (how a restart shows:
     * a restarting engine is unreachable, or answers an error, for its whole start) or at a new metrics URL.
     */
    volatile Map<Integer, CacheConfig> config;
    /** The worker's metrics URL as last seen, and its URIs (null: not an http(s) URL), kept between rounds. */
    String url;
    URI plain;
    URI filtered;
    /** {@link #filtered} without the cache config: the rounds after it was read. */
    URI filteredLoad;
  }

  /** One engine's cache config: GPU blocks, and whether it caches prefixes (null: it does not say). */
  private record CacheConfig(long numGpuBlocks, Boolean prefixCaching) {}

  /**
   * @param filter ask each worker for the series the router reads only ({@link #filteredUri}), falling back per
   *     worker to the whole page when a filtered request does not answer with them
   */
  public MetricsScraper(WorkerRegistry registry, LoadLedger ledger, WorkerHealth health, LongSupplier nanoClock,
      Duration timeout, long maxBytes, boolean filter) {
    this.filter = filter;
    this.registry = registry;
    this.ledger = ledger;
    this.health = health;
    this.nanoClock = nanoClock;
    this.timeout = timeout;
    this.maxBytes = maxBytes;
    AtomicInteger senderNumber = new AtomicInteger();
    this.senders = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, "kvrouter-scrape-" + senderNumber.incrementAndGet());
      t.setDaemon(true);
      return t;
    });
  }

  /** Scrapes every {@code intervalMillis} on {@code scheduler} until {@link #close}. */
  public void start(ScheduledExecutorService scheduler, long intervalMillis) {
    task = scheduler.scheduleWithFixedDelay(() -> {
      try {
        scrapeAll();
      } catch (RuntimeException e) {
        log.error("metrics scrape round failed", e);
      }
    }, 0, intervalMillis, TimeUnit.MILLISECONDS);
  }

  /** Starts one round; the future completes when every request of the round has finished. */
  public CompletableFuture<Void> scrapeAll() {
    WorkerSet fleet = registry.current();
    Set<String> names = new HashSet<>();
    Set<WorkerId> owners = new HashSet<>();
    List<CompletableFuture<?>> round = new ArrayList<>();
    long now = nanoClock.getAsLong();
    for (Worker w : fleet.all()) {
      names.add(w.name());
      owners.addAll(w.cacheOwners());
      State s = states.computeIfAbsent(w.name(), k -> new State());
      synchronized (s) {
        if (s.inFlight != null && !s.inFlight.isDone()) {
          if (now - s.startedNanos < timeout.toNanos()) {
            round.add(s.inFlight);
            continue;
          }
          s.inFlight.cancel(true); // disconnects its exchange, which reports the worker unreachable
        }
        s.startedNanos = now;
        s.inFlight = scrape(w, s);
        round.add(s.inFlight);
      }
    }
    states.entrySet().removeIf(e -> {
      if (names.contains(e.getKey())) {
        return false;
      }
      // a page still trickling in would otherwise hold its connection and a sender for as long as the worker likes
      State s = e.getValue();
      synchronized (s) {
        s.departed = true;
        if (s.inFlight != null) {
          s.inFlight.cancel(true);
        }
      }
      return true;
    });
    latest.keySet().retainAll(owners); // by rank: a worker whose data-parallel size shrank keeps none for the rest
    return CompletableFuture.allOf(round.toArray(CompletableFuture[]::new)).handle((v, e) -> null);
  }

  private CompletableFuture<Void> scrape(Worker w, State s) {
    String url = w.effectiveMetricsUrl();
    if (!url.equals(s.url)) { // parsed once per worker, not per round: the rounds run often and stay cold code
      s.url = url;
      s.plain = null;
      s.config = null;
      s.wholePage = false; // a new endpoint: ask it for the filtered page
      try {
        URI u = URI.create(url);
        if (("http".equalsIgnoreCase(u.getScheme()) || "https".equalsIgnoreCase(u.getScheme()))
            && u.getHost() != null) {
          s.plain = u;
          s.filtered = filteredUri(u);
          s.filteredLoad = filteredUri(u, VllmMetricsParser.LOAD_SERIES);
        }
      } catch (IllegalArgumentException e) {
        // reported below
      }
    }
    URI plain = s.plain;
    if (plain == null) {
      warnNoMetrics(w, "invalid metrics URL " + url);
      return CompletableFuture.completedFuture(null);
    }
    boolean readConfig = s.config == null;
    URI filtered = filter && !s.wholePage ? (readConfig ? s.filtered : s.filteredLoad) : null;
    CompletableFuture<Void> done = new CompletableFuture<>();
    // the exchange in progress, closed if the scrape is cancelled: a blocking socket read ignores interrupts
    AtomicReference<HttpURLConnection> open = new AtomicReference<>();
    Future<?> request;
    try {
      request = senders.submit(() -> {
        boolean published = false;
        try {
          Page page = null;
          if (filtered != null) {
            page = fetch(filtered, open, done, readConfig);
            health.scrapeReached(w.name());
            // A 5xx (starting, overloaded, a proxy between) says nothing about filtering: it is this round's answer.
            if (!page.hasLoad() && page.status < 500) {
              // Refused, not understood, or answered without the gauges: this server does not filter the
              // way prometheus_client does. Read its whole page from now on, starting with this round.
              s.wholePage = true;
              log.info("worker {} did not answer the filtered metrics request (HTTP {}); scraping its whole page",
                  w.name(), page.status);
              page = null;
            }
          }
          if (page == null) {
            page = fetch(plain, open, done, readConfig);
            health.scrapeReached(w.name());
          }
          if (s.departed) {
            return;
          }
          if (page.status != 200) {
            noMetrics.increment();
            warnNoMetrics(w, "HTTP " + page.status + " from " + page.uri);
          } else {
            published = readPage(w, s, page, readConfig);
          }
        } catch (IOException | RuntimeException e) {
          if (!closed && !s.departed) {
            unreachable(w, e); // a cancelled scrape too: still running one timeout after it started
          }
        } finally {
          if (!published) {
            s.config = null; // a round that did not read the page: the engine may be restarting, so ask again
          }
          done.complete(null);
        }
      });
    } catch (RejectedExecutionException e) {
      return CompletableFuture.completedFuture(null); // closed
    }
    // cancelling the scrape disconnects its exchange, which ends a body still trickling in (a read blocked on a body that
    // stopped coming holds the stream until its own timeout, whatever the disconnect). With under 512 kB of a declared
    // length left, the JDK hands the socket to its keep-alive cleaner thread, which drains the rest in the background
    // (http.KeepAlive.remainingData) instead of closing it: the scrape still ends here
    done.whenComplete((v, e) -> {
      if (done.isCancelled()) {
        request.cancel(true);
        HttpURLConnection c = open.get();
        if (c != null) {
          // Not on the cancelling thread (a round, on the runtime's scheduler): closing a stream whose read is blocked
          // waits for that read's monitor, so a body that had stopped coming held the scheduler for a read timeout.
          try {
            senders.execute(c::disconnect);
          } catch (RejectedExecutionException closed) {
            // closed meanwhile: the read ends at its own timeout, and its sender with it
          }
        }
      }
    });
    return done;
  }

  /**
   * The URL that asks for the series the parser reads and nothing else: prometheus_client's exposition app keeps
   * only the samples named by its {@code name[]} parameters. vLLM serves {@code /metrics} through
   * prometheus-fastapi-instrumentator's handler, which ignores parameters, and {@code /metrics/} through
   * prometheus_client's app mounted beside it, so the default path gains a slash. SGLang mounts that app alone.
   */
  static URI filteredUri(URI plain) {
    return filteredUri(plain, VllmMetricsParser.SERIES);
  }

  static URI filteredUri(URI plain, List<String> series) {
    String path = plain.getRawPath() == null ? "" : plain.getRawPath();
    if (path.equals("/metrics")) {
      path = "/metrics/";
    }
    StringBuilder q = new StringBuilder();
    if (plain.getRawQuery() != null && !plain.getRawQuery().isEmpty()) {
      q.append(plain.getRawQuery()).append('&');
    }
    for (String name : series) {
      q.append("name%5B%5D=").append(URLEncoder.encode(name, StandardCharsets.UTF_8)).append('&');
    }
    q.setLength(q.length() - 1);
    return URI.create(plain.getScheme() + "://" + plain.getRawAuthority() + path + "?" + q);
  }

  /**
   * One GET, its body parsed as it is read. A body over {@code maxBytes}, or one the parser failed on, is not read
   * further and its connection is dropped; an error status's body is drained so the connection is kept.
   */
  private Page fetch(URI uri, AtomicReference<HttpURLConnection> open, CompletableFuture<Void> done,
      boolean readConfig) throws IOException {
    HttpURLConnection c = (HttpURLConnection) uri.toURL().openConnection(Proxy.NO_PROXY);
    open.set(c);
    if (done.isCancelled()) {
      throw new IOException("scrape cancelled");
    }
    int millis = (int) Math.min(Integer.MAX_VALUE, Math.max(1, timeout.toMillis()));
    c.setConnectTimeout(millis);
    c.setReadTimeout(millis);
    c.setInstanceFollowRedirects(false);
    c.setUseCaches(false);
    int status = c.getResponseCode();
    VllmMetricsParser parser = new VllmMetricsParser(maxBytes, readConfig);
    RuntimeException failure = null;
    byte[] buf = new byte[8192];
    if (status == 200) {
      try (InputStream in = c.getInputStream()) {
        for (int n; (n = in.read(buf)) >= 0; ) {
          try {
            parser.feed(buf, 0, n);
          } catch (RuntimeException e) {
            failure = e;
          }
          if (failure != null || parser.truncated()) {
            c.disconnect(); // the rest would be ignored: do not read it
            break;
          }
        }
      }
    } else {
      InputStream err = c.getErrorStream();
      if (err != null) {
        try (err) {
          long left = 64 * 1024;
          for (int n; left > 0 && (n = err.read(buf)) >= 0; ) {
            left -= n;
            bytes.add(n);
          }
        }
      }
    }
    bytes.add(parser.bytesRead());
    return new Page(uri, status, parser, failure);
  }

  /** One response: its status and, for a 200, the parsed page or what the parser threw. */
  private static final class Page {
    final URI uri;
    final int status;
    final RuntimeException failure;
    final Map<Integer, VllmMetricsParser.Engine> engines;

    Page(URI uri, int status, VllmMetricsParser parser, RuntimeException failure) {
      this.uri = uri;
      this.status = status;
      Map<Integer, VllmMetricsParser.Engine> parsed = null;
      RuntimeException failed = failure;
      if (status == 200 && failed == null) {
        try {
          parsed = parser.finish();
        } catch (RuntimeException e) {
          failed = e;
        }
      }
      this.failure = failed;
      this.engines = parsed;
    }

    boolean hasLoad() {
      return engines != null && engines.values().stream().anyMatch(VllmMetricsParser.Engine::hasLoad);
    }
  }

  /**
   * A page that answered 200: the worker is reached whatever the page holds. A page the parser failed on is
   * counted as no metrics, never as unreachable: three such scrapes ejected a worker that was serving.
   */
  private boolean readPage(Worker w, State s, Page page, boolean readConfig) {
    if (page.failure != null) {
      noMetrics.increment();
      warnNoMetrics(w, "its page could not be read at " + page.uri + ": " + page.failure);
      return false;
    }
    ok.increment();
    return publish(w, s, page.engines, readConfig);
  }

  private void unreachable(Worker w, Exception e) {
    failed.increment();
    health.scrapeUnreachable(w.name());
    log.debug("scrape of {} failed: {}", w.name(), e.toString());
  }

  /** Publishes the page's load; false when it had none (the round then counts as not having read the page). */
  private boolean publish(Worker w, State s, Map<Integer, VllmMetricsParser.Engine> engines, boolean readConfig) {
    long now = nanoClock.getAsLong();
    if (closed) {
      return false; // closed while this scrape read its page
    }
    if (readConfig) {
      Map<Integer, CacheConfig> config = new HashMap<>();
      engines.forEach((engine, e) -> config.put(engine, new CacheConfig(e.numGpuBlocks, e.prefixCaching)));
      if (engines.values().stream().anyMatch(e -> e.prefixCaching == Boolean.FALSE)) {
        warnPrefixCachingOff(w);
      } else {
        s.warnedPrefixCachingOff = false; // an engine restarted with it on: say so again if a later one turns it off
      }
      s.config = config;
    } else {
      Map<Integer, CacheConfig> config = s.config;
      if (config != null) {
        // as if the page had carried it: an engine label seen only in the config still counts
        config.forEach((engine, c) -> {
          VllmMetricsParser.Engine e = engines.computeIfAbsent(engine, k -> new VllmMetricsParser.Engine());
          e.numGpuBlocks = Math.max(e.numGpuBlocks, c.numGpuBlocks());
        });
      }
    }
    int dp = w.dpSize();
    Map<Integer, VllmMetricsParser.Engine> byRank = new HashMap<>();
    VllmMetricsParser.Engine unlabeled = engines.get(-1);
    if (dp == 1) {
      VllmMetricsParser.Engine sum = new VllmMetricsParser.Engine();
      for (VllmMetricsParser.Engine e : engines.values()) {
        sum.running = add(sum.running, e.running);
        sum.waiting = add(sum.waiting, e.waiting);
        sum.kvUsage = max(sum.kvUsage, e.kvUsage);
        sum.numGpuBlocks = Math.max(sum.numGpuBlocks, e.numGpuBlocks);
      }
      byRank.put(0, sum);
    } else {
      for (int r = 0; r < dp; r++) {
        VllmMetricsParser.Engine e = engines.get(r);
        if (e == null && unlabeled != null) {
          // One unlabelled series for a data-parallel worker: share it evenly across the ranks.
          e = new VllmMetricsParser.Engine();
          e.running = unlabeled.running / dp;
          e.waiting = unlabeled.waiting / dp;
          e.kvUsage = unlabeled.kvUsage;
          e.numGpuBlocks = unlabeled.numGpuBlocks;
        }
        if (e != null) {
          byRank.put(r, e);
        }
      }
    }
    if (byRank.values().stream().noneMatch(VllmMetricsParser.Engine::hasLoad)) {
      warnNoMetrics(w, "no vLLM/SGLang load gauges at " + w.effectiveMetricsUrl());
      return false;
    }
    for (Map.Entry<Integer, VllmMetricsParser.Engine> en : byRank.entrySet()) {
      VllmMetricsParser.Engine e = en.getValue();
      WorkerId id = new WorkerId(w.name(), en.getKey());
      ledger.scraped(id);
      latest.put(id, new ScrapedLoad(nanToZero(e.running), nanToZero(e.waiting), e.kvUsage, e.numGpuBlocks, now));
    }
    return true;
  }

  private void warnNoMetrics(Worker w, String why) {
    State s = states.get(w.name());
    if (s != null && !s.warnedNoMetrics) {
      s.warnedNoMetrics = true;
      log.info("worker {} exposes no load metrics ({}); routing on the router's own ledger for it", w.name(), why);
    }
  }

  /**
   * An engine without prefix caching reuses no prefix and publishes no KV events, while the router still credits it
   * with each prefix it routed there ({@code events.predicted_ttl_ms}): repeats gather on a worker that recomputes
   * them, and only the truth check's {@code over} would hint at why. Said once per worker.
   */
  private void warnPrefixCachingOff(Worker w) {
    State s = states.get(w.name());
    if (s != null && !s.warnedPrefixCachingOff) {
      s.warnedPrefixCachingOff = true;
      log.warn("worker {} runs without prefix caching (vllm:cache_config_info enable_prefix_caching=\"False\" at {}):"
          + " it reuses no cached prefix and publishes no KV events, yet the router credits it with the prefixes it"
          + " routes there for a while (events.predicted_ttl_ms; approximate_ttl_ms without events), so repeats"
          + " gather on a worker that recomputes them; start vLLM with prefix caching on (its default: drop"
          + " --no-enable-prefix-caching)", w.name(), w.effectiveMetricsUrl());
    }
  }

  @Override
  public ScrapedLoad scraped(WorkerId worker) {
    return latest.get(worker);
  }

  /** Successful scrapes, failed (unreachable) scrapes, and scrapes that found no metrics (or none readable). */
  public long[] counts() {
    return new long[] {ok.sum(), failed.sum(), noMetrics.sum()};
  }

  /** Response body bytes read from workers' metrics endpoints, every request counted. */
  public long bytesRead() {
    return bytes.sum();
  }

  /** Workers of the fleet scraped for their whole page because a filtered request did not serve. */
  public int wholePageWorkers() {
    int n = 0;
    for (State s : states.values()) {
      n += filter && s.wholePage ? 1 : 0;
    }
    return n;
  }

  @Override
  public void close() {
    closed = true;
    if (task != null) {
      task.cancel(false);
    }
    for (State s : states.values()) {
      synchronized (s) {
        if (s.inFlight != null) {
          s.inFlight.cancel(true);
        }
      }
    }
    senders.shutdownNow();
  }

  private static double add(double a, double b) {
    return Double.isNaN(a) ? b : Double.isNaN(b) ? a : a + b;
  }

  private static double max(double a, double b) {
    return Double.isNaN(a) ? b : Double.isNaN(b) ? a : Math.max(a, b);
  }

  private static double nanToZero(double d) {
    return Double.isNaN(d) ? 0 : d;
  }
}
