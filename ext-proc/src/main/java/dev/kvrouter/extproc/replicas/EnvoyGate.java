package dev.kvrouter.extproc.replicas;

import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerSet;
import dev.kvrouter.xds.server.EnvoyClusters;
import dev.kvrouter.xds.server.EnvoyClusters.Holding;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Which workers every Envoy known to this router replica, or to any other replica still heard, holds: the router
 * routes to a worker once this is true ({@link #holds}).
 *
 * <p>An Envoy's xDS stream goes to one replica, while its ext_proc requests go to all of them. A replica whose own
 * xDS server hears no Envoy (another replica has its stream, or this one runs in {@code ext-proc} mode) would
 * route to a worker the moment it reads workers.yaml, and Envoy would answer 503 (no such cluster) until it applied
 * the update. So each replica that serves xDS sends what its Envoys hold ({@code ReplicaSync}), and the gate here
 * is the intersection of this replica's view and every peer's; a view that knows no Envoy holds nothing back, and
 * a peer dropped for silence no longer either.
 *
 * <p>Threading: {@link #ownChanged} on the thread that changed the own view (xDS callbacks), {@link #peer} and
 * {@link #forget} on the replica link's; they recompute one immutable set under this object's lock, which
 * {@link #holds}, on the request path, only reads.
 */
public final class EnvoyGate {

  private static final Logger log = LoggerFactory.getLogger(EnvoyGate.class);

  /** This replica's view; null when this process serves no xDS. */
  private final Supplier<Holding> own;
  private final Supplier<WorkerSet> fleet;
  /** Peers' views by replica id; sorted, so the log names them in a stable order. */
  private final Map<Long, Holding> peers = new TreeMap<>();
  /** Workers every known Envoy holds; null while no view knows one. The only field {@link #holds} reads. */
  private volatile Set<String> held;
  private Set<String> lastHeldBack = Set.of();

  /**
   * @param own this replica's view, read on {@link #ownChanged} and by {@code ReplicaSync} to send it; null when
   *     this process serves no xDS (then it sends nothing and only peers' views apply)
   * @param fleet the fleet, for the log of the workers peers hold back
   */
  public EnvoyGate(Supplier<Holding> own, Supplier<WorkerSet> fleet) {
    this.own = own;
    this.fleet = fleet;
    recompute();
  }

  /** True when every Envoy known here or to a live peer holds {@code w}'s cluster, or none is known. */
  public boolean holds(Worker w) {
    Set<String> h = held;
    return h == null || h.contains(w.name());
  }

  /** Workers of {@code fleet} some known Envoy does not hold yet, by name. */
  public Set<String> missing(WorkerSet fleet) {
    return EnvoyClusters.missing(fleet, this::holds);
  }

  /** Whether this process serves xDS, and so has a view of its own to share. */
  public boolean servesXds() {
    return own != null;
  }

  /** This replica's view ({@link Holding#NONE} without an xDS server). */
  public Holding own() {
    return own == null ? Holding.NONE : own.get();
  }

  /** Call after this replica's view changed. */
  public synchronized void ownChanged() {
    recompute();
  }

  /** A peer's view as it last sent it; link thread. */
  synchronized void peer(long replica, Holding view) {
    if (!view.equals(peers.put(replica, view))) {
      recompute();
    }
  }

  /** Forgets a peer dropped for silence: its Envoys hold nothing back any more. Link thread. */
  synchronized void forget(long replica) {
    if (peers.remove(replica) != null) {
      recompute();
    }
  }

  /** Peers whose view knows an Envoy. */
  public synchronized int peersKnowingEnvoys() {
    return (int) peers.values().stream().filter(Holding::knows).count();
  }

  private void recompute() {
    Set<String> next = null;
    Holding mine = own();
    if (mine.knows()) {
      next = new HashSet<>(mine.workers());
    }
    for (Holding v : peers.values()) {
      if (v.knows()) {
        if (next == null) {
          next = new HashSet<>(v.workers());
        } else {
          next.retainAll(v.workers());
        }
      }
    }
    held = next == null ? null : Set.copyOf(next);
    logHeldBack();
  }

  /** Says which workers peers' Envoys hold back (this replica's own are logged by EnvoyClusters), when that changes. */
  private void logHeldBack() {
    Set<String> back = new TreeSet<>();
    List<String> by = new ArrayList<>();
    for (Map.Entry<Long, Holding> e : peers.entrySet()) {
      Holding v = e.getValue();
      if (!v.knows()) {
        continue;
      }
      Set<String> lacking = EnvoyClusters.missing(fleet.get(), w -> v.workers().contains(w.name()));
      if (!lacking.isEmpty()) {
        back.addAll(lacking);
        by.add("replica " + Long.toHexString(e.getKey()) + " (serves xDS to " + v.envoys() + " Envoys) lacks "
            + lacking);
      }
    }
    if (!back.equals(lastHeldBack)) {
      lastHeldBack = back;
      if (back.isEmpty()) {
        log.info("every Envoy the other router replicas know holds every worker's cluster");
      } else {
        log.info("workers not yet in every Envoy of the other router replicas, not routed to: {}", by);
      }
    }
  }

  /** The fleet changed: a new worker may be held back by a peer's Envoys before any view changes. */
  public synchronized void fleetChanged() {
    logHeldBack();
  }
}
