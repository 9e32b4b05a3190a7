package dev.kvrouter.extproc.tokenize;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.cache.CaffeineCacheMetrics;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.LongAdder;
import net.openhft.hashing.LongTupleHashFunction;

/**
 * Token ids of prompt segments (text between added tokens), shared by all tokenizers and request threads, so
 * a conversation's earlier turns, a system prompt or a shared document are tokenized once.
 *
 * <p>Keyed by a 128-bit XXH3 of the segment's UTF-16 text, its length and the tokenizer's {@linkplain
 * Tokenizer#fingerprint() fingerprint} (two models with the same tokenizer files share entries). Bounded by
 * the total number of cached tokens (each entry weighs its token count plus {@link #ENTRY_OVERHEAD_TOKENS});
 * one token costs 4 bytes, so the default 4M tokens is about 16 MB plus per-entry overhead.
 *
 * <p>Thread-safe (Caffeine). Hit and miss counts, in segments and in tokens, are kept here and can be
 * bound to Micrometer.
 */
public final class SegmentCache {
  /** Default bound: 4 Mi tokens. */
  public static final long DEFAULT_MAX_TOKENS = 4L << 20;

  /** Segments shorter than this are cheaper to tokenize than to hash and look up. */
  public static final int DEFAULT_MIN_SEGMENT_CHARS = 32;

  /** Weight added to each entry for its key and bookkeeping, in token units (about 100 bytes). */
  static final int ENTRY_OVERHEAD_TOKENS = 24;

  private static final LongTupleHashFunction XXH128 = LongTupleHashFunction.xx128();

  /** Cache key: tokenizer fingerprint and a 128-bit hash of the segment text. */
  record Key(long scope, long h1, long h2, int length) {}

  /** A snapshot of the counters. */
  public record Stats(long hits, long misses, long hitTokens, long missTokens, long entries, long weightedTokens,
      long evictions) {
    /** Fraction of looked-up segments found, 0 when nothing was looked up. */
    public double hitRate() {
      long total = hits + misses;
      return total == 0 ? 0 : (double) hits / total;
    }
  }

  private final Cache<Key, int[]> cache;
  private final int minSegmentChars;
  private final LongAdder hits = new LongAdder();
  private final LongAdder misses = new LongAdder();
  private final LongAdder hitTokens = new LongAdder();
  private final LongAdder missTokens = new LongAdder();

  private SegmentCache(long maxTokens, int minSegmentChars, Executor executor) {
    if (maxTokens <= 0) {
      throw new IllegalArgumentException("maxTokens must be positive, was " + maxTokens);
    }
    if (minSegmentChars < 1) {
      throw new IllegalArgumentException("minSegmentChars must be at least 1, was " + minSegmentChars);
    }
    Caffeine<Object, Object> b = Caffeine.newBuilder()
        .maximumWeight(maxTokens)
        .recordStats();
    if (executor != null) {
      b.executor(executor);
    }
    this.cache = b.<Key, int[]>weigher((k, v) -> v.length + ENTRY_OVERHEAD_TOKENS).build();
    this.minSegmentChars = minSegmentChars;
  }

  /** A cache bounded to {@code maxTokens} cached tokens. */
  public static SegmentCache create(long maxTokens) {
    return new SegmentCache(maxTokens, DEFAULT_MIN_SEGMENT_CHARS, null);
  }

  /**
   * A cache with every knob: {@code executor} runs Caffeine's maintenance (null for the common pool;
   * {@code Runnable::run} makes eviction deterministic in tests).
   */
  public static SegmentCache create(long maxTokens, int minSegmentChars, Executor executor) {
    return new SegmentCache(maxTokens, minSegmentChars, executor);
  }

  int minSegmentChars() {
    return minSegmentChars;
  }

  /** The key of {@code text[start, end)} for the tokenizer with fingerprint {@code scope}. */
  static Key key(long scope, CharSequence text, int start, int end, long[] scratch) {
    XXH128.hashChars(text, start, end - start, scratch);
    return new Key(scope, scratch[0], scratch[1], end - start);
  }

  /** The cached ids, or null; counts a hit or a miss. */
  int[] get(Key key) {
    int[] ids = cache.getIfPresent(key);
    if (ids == null) {
      misses.increment();
    } else {
      hits.increment();
      hitTokens.add(ids.length);
    }
    return ids;
  }

  void put(Key key, int[] ids) {
    missTokens.add(ids.length);
    cache.put(key, ids);
  }

  /** Drops every entry (counters are kept). */
  public void invalidateAll() {
    cache.invalidateAll();
    cache.cleanUp();
  }

  public Stats stats() {
    var s = cache.stats();
    long weighted = cache.policy().eviction().map(e -> e.weightedSize().orElse(0L)).orElse(0L);
    return new Stats(hits.sum(), misses.sum(), hitTokens.sum(), missTokens.sum(), cache.estimatedSize(), weighted,
        s.evictionCount());
  }

  /**
   * Registers Caffeine's cache metrics under {@code name} plus {@code kvrouter_tokenizer_segment_cache_tokens}
   * counters (tag {@code result=hit|miss}) of tokens served from and added to the cache.
   */
  public void bindTo(MeterRegistry registry, String name) {
    CaffeineCacheMetrics.monitor(registry, cache, name);
    FunctionCounter.builder("kvrouter_tokenizer_segment_cache_tokens", hitTokens, LongAdder::sum)
        .tag("cache", name).tag("result", "hit")
        .description("tokens served from the segment cache").register(registry);
    FunctionCounter.builder("kvrouter_tokenizer_segment_cache_tokens", missTokens, LongAdder::sum)
        .tag("cache", name).tag("result", "miss")
        .description("tokens tokenized and added to the segment cache").register(registry);
  }

  /** Runs pending maintenance (eviction); for tests and stats. */
  void cleanUp() {
    cache.cleanUp();
  }
}
