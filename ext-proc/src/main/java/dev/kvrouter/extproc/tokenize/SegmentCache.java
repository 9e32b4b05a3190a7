package dev.kvrouter.extproc.tokenize;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.cache.CaffeineCacheMetrics;
import java.util.concurrent.Executor;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.LongAdder;
import net.openhft.hashing.LongHashFunction;

/**
 * Token ids of prompt segments (text between added tokens), shared by all tokenizers and request threads, so
 * a conversation's earlier turns, a system prompt or a shared document are tokenized once.
 *
 * <p>Keyed by the tokenizer's {@linkplain Tokenizer#fingerprint() fingerprint} (two models with the same
 * tokenizer files share entries), the segment length and a 64-bit XXH3 of its text under a per-cache random
 * seed. Each entry keeps the segment text and a hit is confirmed by comparing it, so a hash collision, even
 * a crafted one, can only cost a miss, never wrong ids. Bounded by weight in token units (4 bytes): the
 * ids, the text at 2 bytes per char, and {@link #ENTRY_OVERHEAD_TOKENS}; the default 4 Mi units is about
 * 16 MB, roughly 1.3 M cached tokens of English.
 *
 * <p>Thread-safe (Caffeine). Hit and miss counts, in segments and in tokens, are kept here and can be
 * bound to Micrometer.
 */
public final class SegmentCache {
  /** Default bound: 4 Mi tokens. */
  public static final long DEFAULT_MAX_TOKENS = 4L << 20;

  /** Segments shorter than this are cheaper to tokenize than to hash and look up. */
  public static final int DEFAULT_MIN_SEGMENT_CHARS = 32;

  /** Weight added to each entry for its key and bookkeeping, in token units (about 128 bytes). */
  static final int ENTRY_OVERHEAD_TOKENS = 32;

  /** Cache key: tokenizer fingerprint, segment length and hash. */
  record Key(long scope, long hash, int length) {}

  /** The segment text (to confirm hits) and its ids. */
  private record Entry(String text, int[] ids) {}

  /** A snapshot of the counters. */
  public record Stats(long hits, long misses, long hitTokens, long missTokens, long entries, long weightedTokens,
      long evictions, long collisions) {
    /** Fraction of looked-up segments found, 0 when nothing was looked up. */
    public double hitRate() {
      long total = hits + misses;
      return total == 0 ? 0 : (double) hits / total;
    }
  }

  private final Cache<Key, Entry> cache;
  private final LongHashFunction hash = LongHashFunction.xx3(ThreadLocalRandom.current().nextLong());
  private final int minSegmentChars;
  private final LongAdder hits = new LongAdder();
  private final LongAdder misses = new LongAdder();
  private final LongAdder hitTokens = new LongAdder();
  private final LongAdder missTokens = new LongAdder();
  private final LongAdder collisions = new LongAdder();

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
    this.cache = b.<Key, Entry>weigher((k, v) -> v.ids.length + (v.text.length() + 1) / 2 + ENTRY_OVERHEAD_TOKENS)
        .build();
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
  Key key(long scope, CharSequence text, int start, int end) {
    long h;
    if (text instanceof String s) {
      h = hash.hashChars(s, start, end - start);
    } else if (text instanceof StringBuilder sb) {
      h = hash.hashChars(sb, start, end - start);
    } else {
      h = hash.hashChars(text.subSequence(start, end).toString());
    }
    return new Key(scope, h, end - start);
  }

  /** The cached ids of {@code text[start, end)}, or null; counts a hit or a miss. */
  int[] get(Key key, CharSequence text, int start, int end) {
    Entry e = cache.getIfPresent(key);
    if (e != null && !sameText(e.text, text, start, end)) {
      collisions.increment();
      e = null;
    }
    if (e == null) {
      misses.increment();
      return null;
    }
    hits.increment();
    hitTokens.add(e.ids.length);
    return e.ids;
  }

  private static boolean sameText(String cached, CharSequence text, int start, int end) {
    if (text instanceof String s) {
      return s.regionMatches(start, cached, 0, cached.length());
    }
    for (int i = 0; i < cached.length(); i++) {
      if (cached.charAt(i) != text.charAt(start + i)) {
        return false;
      }
    }
    return true;
  }

  void put(Key key, CharSequence text, int start, int[] ids) {
    missTokens.add(ids.length);
    cache.put(key, new Entry(text.subSequence(start, start + key.length()).toString(), ids));
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
        s.evictionCount(), collisions.sum());
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
