package dev.kvrouter.extproc.server;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.RemovalCause;
import dev.kvrouter.extproc.routing.Decision;
import java.time.Duration;
import java.util.Iterator;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
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
 *
 * <p>A decision whose routing stream closed (the exchange is over) before any observer claimed it waits a grace
 * period for a late observer and is then ended by {@link #endOrphans}: the observer went to another router
 * replica (a load balancer in front of several replicas that splits one request's two streams), or there is no
 * observer filter. Without that its reservation would count as load until the ledger's expiry, minutes later.
 */
public final class InFlight {

  private static final Logger log = LoggerFactory.getLogger(InFlight.class);

  private final Cache<String, Exchange> pending;
  private final AtomicLong unclaimed = new AtomicLong();
  private final AtomicLong claimed = new AtomicLong();
  private final AtomicLong left = new AtomicLong();
  private final AtomicLong followedForTheEnd = new AtomicLong();
  private final LongAdder observerMessages = new LongAdder();
  /** Routing streams closed with their decision unclaimed, oldest first (close order). */
  private final ConcurrentLinkedQueue<Orphan> orphans = new ConcurrentLinkedQueue<>();
  private final AtomicInteger orphanCount = new AtomicInteger();
  private final AtomicLong observerMissing = new AtomicLong();
  /** Decisions ended by {@link #endOrphans}, for telling a late observer apart: bounded, expiring. */
  private final Cache<String, Boolean> endedOrphans;
  private final AtomicLong lateObservers = new AtomicLong();
  private final AtomicLong reusedIds = new AtomicLong();
  /** Orphans waiting at most (the decisions' own bound, {@code maxEntries}, unless a test sets it apart). */
  private final long maxOrphans;
  /**
   * How long a closed routing stream's unclaimed decision waits for a late response observer ({@link #endOrphans}).
   * An observer arrives when the response starts, long before the routing stream closes at the exchange's end,
   * but its message and that close travel on different streams.
   */
  public static final long ORPHAN_GRACE_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(2);

  /**
   * A closed routing stream's exchange and how to end its request if nobody claims it. The exchange, not only its id:
   * once claimed, the id may be registered again by a later request with the client's same x-request-id.
   */
  private record Orphan(Exchange exchange, long closedNanos, Runnable end) {
    String id() {
      return exchange.decision().id();
    }
  }

  public InFlight(long maxEntries, Duration ttl) {
    this(maxEntries, maxEntries, ttl);
  }

  InFlight(long maxEntries, long maxOrphans, Duration ttl) {
    this.maxOrphans = maxOrphans;
    endedOrphans = Caffeine.newBuilder().maximumSize(Math.min(maxEntries, 10_000)).expireAfterWrite(ttl).build();
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

  /**
   * Registers {@code x} under its decision's id, or, if another request in flight already has that id, under a
   * fresh one ({@code id~seq}), and returns what was registered. The decision id is the client's
   * {@code x-request-id} when it sends one, and Envoy keeps a client's id (without {@code use_remote_address}):
   * a retrying client or a proxy that reuses ids would otherwise have the second request's entry replace the
   * first, whose observer then follows and ends the wrong request while the first is never ended.
   */
  Exchange register(Exchange x) {
    Exchange registered = x;
    for (int n = 1; pending.asMap().putIfAbsent(registered.decision().id(), registered) != null; n++) {
      Decision d = x.decision();
      registered = new Exchange(d.withId(d.id() + "~" + d.seq() + (n > 1 ? "." + n : "")));
    }
    if (registered != x && reusedIds.getAndIncrement() == 0) {
      log.warn("two requests in flight at once carried request id {}; the later one's decision id is {} (its "
          + "x-kvrouter-decision and decision record say so). Clients that reuse x-request-id: counted in "
          + "kvrouter_observer_reused_ids_total", x.decision().id(), registered.decision().id());
    }
    return registered;
  }

  /** Requests that arrived with the id of one still in flight and were given a fresh decision id, since start. */
  public long reusedIds() {
    return reusedIds.get();
  }

  /** Removes and returns the exchange of the decision with this id, or null. */
  Exchange claim(String id) {
    return claim(id, null, false);
  }

  /**
   * Takes back {@code x} itself, by the routing stream that registered it: once its observer claimed it, its id may
   * name a later request with the client's same x-request-id.
   */
  boolean reclaim(Exchange x) {
    return claim(x.decision().id(), x, false) != null;
  }

  /** As {@link #claim}, by the response observer: it follows the response from here ({@link Exchange#isObserved}). */
  Exchange claimByObserver(String id) {
    return claim(id, null, true);
  }

  /** Claims the exchange of decision {@code id} if it is {@code only} (any when null). */
  private Exchange claim(String id, Exchange only, boolean byObserver) {
    if (id == null) {
      return null;
    }
    Exchange[] taken = new Exchange[1];
    // Counted inside the removal, before the entry leaves the map: whoever sees pending() drop also sees the
    // claim counted. Counting after the removal let a reader catch the gap between the two (a test saw pending 0,
    // read claimed, and then the late increment landed in its own window).
    pending.asMap().computeIfPresent(id, (k, x) -> {
      if (only != null && x != only) {
        return x;
      }
      if (byObserver) {
        x.observed();
      }
      claimed.incrementAndGet();
      taken[0] = x;
      return null;
    });
    return taken[0];
  }

  /**
   * The routing stream of {@code x} closed at {@code nowNanos} while its decision was still unclaimed:
   * {@code end} ends the request (releases its load) unless an observer claims it within the grace period of
   * {@link #endOrphans}.
   */
  void routingClosedUnclaimed(Exchange x, long nowNanos, Runnable end) {
    if (!waiting(x)) {
      return; // claimed already (an observer following the response to its end): nothing to wait for
    }
    orphans.add(new Orphan(x, nowNanos, end));
    orphanCount.incrementAndGet();
  }

  /**
   * Ends the requests whose routing stream closed at least {@code graceNanos} before {@code nowNanos} and whose
   * decision no observer has claimed since (also sooner, oldest first, past {@code maxOrphans} waiting). Called
   * periodically by one thread; returns how many it ended.
   *
   * <p>The shipped Envoy configs keep the routing stream open until the exchange is over, so an unclaimed decision
   * at its close has an observer elsewhere or none. An Envoy whose routing filter does not ask for response
   * trailers closes it after the request phases instead, before the response starts: an unclaimed decision there
   * is a response still to come. The router learns which it is behind (see {@link #closesAtTheEnd}); while it
   * does not end them, orphans wait for their observer (at most {@code maxOrphans}, the oldest dropped first) and
   * leave the queue once claimed, whatever still waits before them.
   */
  public int endOrphans(long nowNanos, long graceNanos) {
    boolean closesAtTheEnd = closesAtTheEnd();
    int ended = 0;
    for (Iterator<Orphan> it = orphans.iterator(); it.hasNext(); ) {
      Orphan o = it.next();
      boolean over = orphanCount.get() > maxOrphans;
      if (!over && nowNanos - o.closedNanos() < graceNanos) {
        break;
      }
      if (waiting(o.exchange()) && !closesAtTheEnd && !over) {
        // unclaimed, and nothing says yet that the exchange is over: it waits (bounded by maxOrphans), but not
        // those behind it, whose observers may have come (a long generation at the head held them all)
        continue;
      }
      it.remove();
      orphanCount.decrementAndGet();
      if (closesAtTheEnd && claim(o.id(), o.exchange(), false) != null) {
        if (observerMissing.getAndIncrement() == 0) {
          log.warn("a response observer never claimed decision {} although its exchange was over; its request "
              + "was ended when the routing stream closed, without its status or usage. Several router replicas "
              + "behind a load balancer that sends a request's routing and observer streams to different "
              + "replicas? The kvrouter_ext_proc cluster of envoy-config/ hashes both on the request id "
              + "(docs/ext-proc.md, \"Several router replicas\")", o.id());
        }
        endedOrphans.put(o.id(), Boolean.TRUE);
        o.end().run();
        ended++;
      }
    }
    return ended;
  }

  /** Whether {@code x} is still registered, unclaimed (its id may since name another request's). */
  private boolean waiting(Exchange x) {
    return pending.getIfPresent(x.decision().id()) == x;
  }

  /**
   * Whether the routing stream is taken to close at the exchange's end: unless an observer ever came for a request
   * already ended here, or observers had to follow more streamed responses to their end because the routing
   * stream was closed at their first chunk than they could leave (a short response can race its routing stream's
   * close, so the odd forced follow does not decide it).
   */
  boolean closesAtTheEnd() {
    return lateObservers.get() == 0 && followedForTheEnd.get() <= left.get();
  }

  /**
   * An observer brought decision {@code id} and found nothing to claim. If the request had been ended as an
   * orphan, the routing stream had closed before the response started: orphans are no longer ended.
   */
  void unclaimedByObserver(String id) {
    if (id != null && endedOrphans.asMap().remove(id) != null && lateObservers.getAndIncrement() == 0) {
      log.warn("the response observer of decision {} came after its request had been ended at its routing "
          + "stream's close: this Envoy's routing filter closes its stream before the response (set "
          + "response_trailer_mode: SEND as envoy-config/envoy.yaml does); unclaimed requests are left to their "
          + "observer from now on", id);
    }
  }

  /** Observers that came for a request already ended at its routing stream's close, since start. */
  public long lateObservers() {
    return lateObservers.get();
  }

  /** Closed routing streams whose decision waits in the queue of {@link #endOrphans}. */
  public int orphansWaiting() {
    return orphanCount.get();
  }

  /**
   * Requests ended at their routing stream's close because no response observer claimed their decision within
   * the grace period, since start.
   */
  public long observerMissing() {
    return observerMissing.get();
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
