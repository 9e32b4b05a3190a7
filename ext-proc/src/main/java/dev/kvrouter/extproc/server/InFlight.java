package dev.kvrouter.extproc.server;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.RemovalCause;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Routed requests waiting for their response observer: the routing stream registers each decision by id, and
 * the observability stream Envoy opens for the same request (a second ext_proc filter in
 * {@code observability_mode}) claims it by the decision id Envoy forwards to it in {@code envoy.lb} metadata (or
 * from the {@code x-kvrouter-decision} request header, for configs that send the observer request headers). The
 * claim happens when the response starts, which for a non-streamed answer is when generation ends: the TTL covers
 * long generations.
 *
 * <p>Bounded and expiring: a decision nobody claims (no observer filter configured, or the client left before
 * the upstream answered) is dropped after {@code ttl}; the load ledger's own straggler expiry keeps its counters
 * right in that case.
 */
public final class InFlight {

  private static final Logger log = LoggerFactory.getLogger(InFlight.class);

  private final Cache<String, Exchange> pending;
  private final AtomicLong unclaimed = new AtomicLong();
  private final AtomicLong claimed = new AtomicLong();
  private final AtomicLong left = new AtomicLong();
  private final AtomicLong followedForTheEnd = new AtomicLong();
  private final LongAdder observerMessages = new LongAdder();

  public InFlight(long maxEntries, Duration ttl) {
    pending = Caffeine.newBuilder()
        .maximumSize(maxEntries)
        .expireAfterWrite(ttl)
        .removalListener((String id, Exchange x, RemovalCause cause) -> {
          if (cause.wasEvicted() && unclaimed.getAndIncrement() == 0) {
            log.warn("a routed request was never claimed by a response observer (first seen: {}); without the "
                + "observer filter the load ledger relies on reservation expiry", id);
          }
        })
        .build();
  }

  void register(Exchange x) {
    pending.put(x.decision().id(), x);
  }

  /** Removes and returns the exchange of the decision with this id, or null. */
  Exchange claim(String id) {
    if (id == null) {
      return null;
    }
    Exchange[] taken = new Exchange[1];
    // Counted inside the removal, before the entry leaves the map: whoever sees pending() drop also sees the
    // claim counted. Counting after the removal let a reader catch the gap between the two (a test saw pending 0,
    // read claimed, and then the late increment landed in its own window).
    pending.asMap().computeIfPresent(id, (k, x) -> {
      claimed.incrementAndGet();
      taken[0] = x;
      return null;
    });
    return taken[0];
  }

  /** Decisions claimed since start (by an observer, or taken back by a routing stream that saw the response). */
  public long claimed() {
    return claimed.get();
  }

  /** Streamed responses the observer stopped following after their first chunk, since start. */
  public long left() {
    return left.get();
  }

  void observerLeft() {
    left.incrementAndGet();
  }

  /**
   * Streamed responses the observer meant to leave but had to follow to their end, because Envoy had already
   * closed the routing stream that would have reported the end: an Envoy config whose routing filter does not
   * ask for response trailers (docs/ext-proc.md). A short response can also end before its first chunk reaches
   * the observer, so the warning waits for 64 of them without a single response ever left.
   */
  public long followedForTheEnd() {
    return followedForTheEnd.get();
  }

  void observerStayed() {
    if (followedForTheEnd.incrementAndGet() == 64 && left.get() == 0) {
      log.warn("the routing ext_proc stream closed before a streamed response started, so the response observer "
          + "follows every chunk of it to learn its end (one gRPC message per token); set "
          + "response_trailer_mode: SEND on the routing filter as envoy-config/envoy.yaml does");
    }
  }

  /** Messages the response observer filter sent since start: one per response chunk while a response is followed. */
  public long observerMessages() {
    return observerMessages.sum();
  }

  void observerMessage() {
    observerMessages.increment();
  }

  /** Decisions routed and not yet claimed nor expired. */
  public long pending() {
    return pending.estimatedSize();
  }

  /** Decisions that expired or were evicted unclaimed since start. */
  public long unclaimed() {
    pending.cleanUp();
    return unclaimed.get();
  }
}
