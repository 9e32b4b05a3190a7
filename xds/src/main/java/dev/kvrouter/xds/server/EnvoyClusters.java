package dev.kvrouter.xds.server;

import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerSet;
import io.envoyproxy.controlplane.cache.VersionedResource;
import io.envoyproxy.controlplane.cache.v3.Snapshot;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.service.discovery.v3.DeltaDiscoveryRequest;
import io.envoyproxy.envoy.service.discovery.v3.DeltaDiscoveryResponse;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryRequest;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryResponse;
import io.envoyproxy.envoy.service.discovery.v3.Resource;
import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Which worker clusters the Envoys on this server's xDS streams hold, from what they acknowledge.
 *
 * <p>With cluster-header routing, a worker the router picks before Envoy has its cluster gets Envoy's 503 (no such
 * cluster), and the 503s may count toward the worker's ejection. The router reads {@link #holds} and routes to a new
 * worker only once every Envoy it knows of holds the worker's cluster. What an Envoy holds is what it last accepted:
 * the clusters of the response whose nonce it acknowledges without an error (state of the world and delta alike),
 * or, on a reconnect, the version (state of the world) or resources (delta) it says it has. A worker's cluster is
 * held in the version last published: a worker that moved (same name, new address) is routed to by its name, and
 * an Envoy with its old cluster would send it to the old address.
 *
 * <p>An Envoy whose stream closes keeps its clusters (Envoy keeps its last config without xDS), so its last known
 * set is remembered for {@link #REMEMBER_NANOS}: long enough for a live Envoy to reconnect (its retry backoff tops
 * out at 30 s), short enough that an Envoy scaled away holds back new workers for only that long. With no Envoy
 * known (no xDS streams: {@code envoy-original-dst.yaml} needs none per worker, or the router runs without xDS),
 * every worker counts as held, as before. A stream whose state is unknown (a reconnect naming a version another
 * process published) has no say until it acknowledges.
 *
 * <p>Callbacks arrive on gRPC threads of many streams; they change state under this object's lock and publish an
 * immutable {@link Holding}, which {@link #holds} only reads. Other router replicas route through the same Envoys
 * without hearing their xDS streams, so the holding is what this replica shares with them ({@link #onChange}).
 */
public final class EnvoyClusters {

  private static final Logger log = LoggerFactory.getLogger(EnvoyClusters.class);
  static final String CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
  private static final String WORKER_CLUSTER = Worker.clusterName("");
  /** Twice Envoy's default maximum xDS retry backoff (30 s). */
  static final long REMEMBER_NANOS = 60_000_000_000L;
  /** Responses a stream may leave unacknowledged before the oldest are forgotten; Envoy answers each in order. */
  private static final int MAX_PENDING = 16;
  /** Snapshot versions kept for Envoys that reconnect naming one. */
  private static final int MAX_VERSIONS = 16;
  /** Closed streams remembered at most; more means Envoys come and go faster than they could matter. */
  private static final int MAX_DEPARTED = 256;

  private final LongSupplier nanoTime;
  private final Map<Long, Stream> streams = new HashMap<>();
  private final Deque<Departed> departed = new ArrayDeque<>();
  private final LinkedHashMap<String, Map<String, String>> versions = new LinkedHashMap<>() {
    @Override
    protected boolean removeEldestEntry(Map.Entry<String, Map<String, String>> e) {
      return size() > MAX_VERSIONS;
    }
  };
  private WorkerSet fleet = WorkerSet.empty();
  /** The worker clusters last published: worker name to the cluster's resource version. */
  private Map<String, String> latest = Map.of();
  /** The only field {@link #holds} reads. */
  private volatile Holding holding = Holding.NONE;
  private volatile Runnable listener = () -> { };
  private Set<String> lastLacking = Set.of();

  /**
   * What the known Envoys hold: how many are known ({@code 0}: none, so every worker counts as held) and the workers
   * whose cluster every one of them holds. Router replicas send each other theirs ({@code EnvoyGate}).
   */
  public record Holding(int envoys, Set<String> workers) {
    public static final Holding NONE = new Holding(0, Set.of());

    public Holding {
      workers = Set.copyOf(workers);
    }

    public boolean holds(String worker) {
      return envoys == 0 || workers.contains(worker);
    }

    /** Whether any Envoy is known; one that is not holds nothing back. */
    public boolean knows() {
      return envoys > 0;
    }
  }

  public EnvoyClusters(LongSupplier nanoTime) {
    this.nanoTime = nanoTime;
  }

  /**
   * True when every Envoy this server knows of holds {@code w}'s cluster, or none is known. It reads what Envoys
   * acknowledged, never the fleet, so a worker the registry has just added is not held until they say so.
   */
  public boolean holds(Worker w) {
    return holding.holds(w.name());
  }

  /** What the known Envoys hold now; a new object whenever it changes. */
  public Holding holding() {
    return holding;
  }

  /**
   * Runs {@code r} after every change of {@link #holding} (one listener; the last set wins). It runs on the gRPC or
   * timer thread that made the change, under this object's lock, so in the order of the changes: it must not block.
   */
  public void onChange(Runnable r) {
    listener = r;
  }

  /** Workers of {@code fleet} some known Envoy does not hold yet, by name. */
  public Set<String> missing(WorkerSet fleet) {
    return missing(fleet, this::holds);
  }

  /** Workers of {@code fleet} that are not {@code held}, by name, sorted. */
  public static Set<String> missing(WorkerSet fleet, java.util.function.Predicate<Worker> held) {
    Set<String> names = new TreeSet<>();
    for (Worker w : fleet.all()) {
      if (!held.test(w)) {
        names.add(w.name());
      }
    }
    return names;
  }

  /** Workers of the fleet last published some known Envoy does not hold yet, by name. */
  public synchronized Set<String> missingWorkers() {
    return missing(fleet);
  }

  /** Envoys known now: streams with a known state, and closed ones still remembered. */
  public int envoys() {
    return holding.envoys();
  }

  synchronized void published(WorkerSet fleet, Snapshot snapshot) {
    this.fleet = fleet;
    Map<String, String> clusters = new HashMap<>();
    snapshot.clusters().versionedResources().forEach((cluster, r) -> clusters.put(cluster, r.version()));
    latest = workers(clusters);
    versions.put(snapshot.clusters().version(), latest);
    recompute();
  }

  synchronized void opened(long streamId, String typeUrl) {
    if (typeUrl.isEmpty() || typeUrl.equals(CDS)) {
      streams.put(streamId, new Stream());
    }
  }

  synchronized void closed(long streamId) {
    Stream s = streams.remove(streamId);
    if (s != null && s.held != null) {
      departed.addLast(new Departed(s.node, s.held, nanoTime.getAsLong()));
      if (departed.size() > MAX_DEPARTED) {
        departed.removeFirst();
      }
      recompute();
    }
  }

  synchronized void request(long streamId, DiscoveryRequest r) {
    Stream s = stream(streamId, r.getTypeUrl(), r.hasNode() ? r.getNode().getId() : null);
    if (s == null || r.hasErrorDetail()) {
      return; // a rejected update leaves the Envoy with what it had
    }
    Map<String, String> held;
    if (!r.getResponseNonce().isEmpty()) {
      held = s.acknowledged(r.getResponseNonce());
    } else if (s.held != null) {
      return;
    } else {
      // The stream's first request names the version the Envoy has: none on a first connection, and on a
      // reconnect one this process may not have published (then the stream has no say until it acknowledges)
      held = r.getVersionInfo().isEmpty() ? Map.of() : versions.get(r.getVersionInfo());
    }
    if (held != null) {
      s.hold(held);
    }
  }

  synchronized void response(long streamId, DiscoveryResponse r) {
    Stream s = streams.get(streamId);
    if (s != null && r.getTypeUrl().equals(CDS)) {
      Map<String, String> workers = new HashMap<>();
      for (Any a : r.getResourcesList()) {
        Cluster c = cluster(a);
        String worker = workerOf(c.getName());
        if (worker != null) {
          // the version java-control-plane gives the resource (delta responses carry it; these do not)
          workers.put(worker, VersionedResource.create(c).version());
        }
      }
      s.sent(r.getNonce(), new Delta(workers, Set.of(), true));
    }
  }

  synchronized void deltaRequest(long streamId, DeltaDiscoveryRequest r) {
    Stream s = stream(streamId, r.getTypeUrl(), r.hasNode() ? r.getNode().getId() : null);
    if (s == null || r.hasErrorDetail()) {
      return;
    }
    if (r.getResponseNonce().isEmpty()) {
      if (s.held == null) {
        s.hold(workers(r.getInitialResourceVersionsMap()));
      }
      return;
    }
    Map<String, String> held = s.acknowledged(r.getResponseNonce());
    if (held != null) {
      s.hold(held);
    }
  }

  synchronized void deltaResponse(long streamId, DeltaDiscoveryResponse r) {
    Stream s = streams.get(streamId);
    if (s != null && r.getTypeUrl().equals(CDS)) {
      Map<String, String> added = new HashMap<>();
      for (Resource res : r.getResourcesList()) {
        added.put(res.getName(), res.getVersion());
      }
      Set<String> removed = new HashSet<>();
      for (String cluster : r.getRemovedResourcesList()) {
        String worker = workerOf(cluster);
        if (worker != null) {
          removed.add(worker);
        }
      }
      s.sent(r.getNonce(), new Delta(workers(added), removed, false));
    }
  }

  /** Forgets closed streams remembered longer than {@link #REMEMBER_NANOS}; run it now and then. */
  synchronized void forgetDeparted() {
    long now = nanoTime.getAsLong();
    boolean changed = false;
    while (!departed.isEmpty() && now - departed.peekFirst().at() >= REMEMBER_NANOS) {
      departed.removeFirst();
      changed = true;
    }
    if (changed) {
      recompute();
    }
  }

  /** The stream's state if it is a CDS conversation (ADS carries other types too); records the node on first sight. */
  private Stream stream(long streamId, String typeUrl, String node) {
    Stream s = streams.get(streamId);
    if (s == null || !typeUrl.equals(CDS)) {
      return null;
    }
    if (s.node == null && node != null) {
      s.node = node;
    }
    return s;
  }

  private void recompute() {
    List<Map<String, String>> holdings = new ArrayList<>();
    for (Stream s : streams.values()) {
      if (s.held != null) {
        holdings.add(s.held);
      }
    }
    for (Departed d : departed) {
      holdings.add(d.held());
    }
    Holding before = holding;
    if (holdings.isEmpty()) {
      holding = Holding.NONE;
    } else {
      Set<String> workers = new HashSet<>();
      for (Map.Entry<String, String> e : latest.entrySet()) {
        boolean everywhere = true;
        for (Map<String, String> held : holdings) {
          everywhere &= e.getValue().equals(held.get(e.getKey()));
        }
        if (everywhere) {
          workers.add(e.getKey());
        }
      }
      holding = new Holding(holdings.size(), workers);
    }
    Set<String> lacking = missing(fleet);
    if (!lacking.equals(lastLacking)) {
      lastLacking = lacking;
      if (lacking.isEmpty()) {
        log.info("every Envoy holds every worker's cluster ({} Envoys known)", holdings.size());
      } else {
        log.info("workers not yet in every Envoy, not routed to: {} ({} Envoys known)", lacking, holdings.size());
      }
    } else if (before.envoys() == 0 && holding.envoys() > 0) {
      log.info("routing to workers once every Envoy holds their cluster ({} Envoys known)", holdings.size());
    }
    if (!holding.equals(before)) {
      listener.run();
    }
  }

  private static Cluster cluster(Any a) {
    try {
      return a.unpack(Cluster.class);
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalStateException("this server only sends clusters on CDS", e);
    }
  }

  /** The worker whose cluster {@code cluster} is, or null (a pool); by name, so reads build no cluster names. */
  private static String workerOf(String cluster) {
    return cluster.startsWith(WORKER_CLUSTER) ? cluster.substring(WORKER_CLUSTER.length()) : null;
  }

  /** The worker clusters of {@code clusters} (cluster name to resource version), by worker name. */
  private static Map<String, String> workers(Map<String, String> clusters) {
    Map<String, String> workers = new HashMap<>();
    clusters.forEach((cluster, version) -> {
      String worker = workerOf(cluster);
      if (worker != null) {
        workers.put(worker, version);
      }
    });
    return Map.copyOf(workers);
  }

  /**
   * What one response changes, by worker name to the cluster's resource version: the whole set (state of the
   * world), or what it adds and removes (delta).
   */
  private record Delta(Map<String, String> added, Set<String> removed, boolean whole) {}

  private record Departed(String node, Map<String, String> held, long at) {}

  /** One xDS stream that carries CDS. */
  private final class Stream {
    String node;
    /** What this Envoy holds, by worker name to its cluster's resource version; null while unknown. */
    Map<String, String> held;
    final LinkedHashMap<String, Delta> pending = new LinkedHashMap<>();

    void sent(String nonce, Delta d) {
      pending.put(nonce, d);
      if (pending.size() > MAX_PENDING) {
        Iterator<String> it = pending.keySet().iterator();
        it.next();
        it.remove();
      }
    }

    /** What the Envoy holds once it accepts the response {@code nonce}; null if that response is unknown. */
    Map<String, String> acknowledged(String nonce) {
      if (!pending.containsKey(nonce)) {
        return null;
      }
      // Envoy answers responses in order, so the ones sent before this one are answered or superseded.
      Delta d = null;
      for (Iterator<Map.Entry<String, Delta>> it = pending.entrySet().iterator(); d == null; ) {
        Map.Entry<String, Delta> e = it.next();
        it.remove();
        d = e.getKey().equals(nonce) ? e.getValue() : null;
      }
      if (d.whole()) {
        return Map.copyOf(d.added());
      }
      Map<String, String> next = new HashMap<>(held == null ? Map.of() : held);
      next.putAll(d.added());
      next.keySet().removeAll(d.removed());
      return Map.copyOf(next);
    }

    void hold(Map<String, String> clusters) {
      boolean first = held == null;
      held = clusters;
      if (first && node != null) {
        // This Envoy is back, naming what it had: one remembered record of that id and holding has a live stream now.
        // Not one holding otherwise: Envoys share a node id (envoy.yaml's), and one that starts while another is
        // cut off is not that one; a restarted Envoy's record lasts its minute.
        for (Iterator<Departed> it = departed.iterator(); it.hasNext(); ) {
          Departed d = it.next();
          if (node.equals(d.node()) && clusters.equals(d.held())) {
            it.remove();
            break;
          }
        }
      }
      recompute();
    }
  }
}
