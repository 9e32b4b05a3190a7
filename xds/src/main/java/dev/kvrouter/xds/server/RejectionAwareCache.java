package dev.kvrouter.xds.server;

import io.envoyproxy.controlplane.cache.AbstractWatch;
import io.envoyproxy.controlplane.cache.DeltaResponse;
import io.envoyproxy.controlplane.cache.DeltaWatch;
import io.envoyproxy.controlplane.cache.DeltaXdsRequest;
import io.envoyproxy.controlplane.cache.NodeGroup;
import io.envoyproxy.controlplane.cache.Response;
import io.envoyproxy.controlplane.cache.Watch;
import io.envoyproxy.controlplane.cache.WatchCancelledException;
import io.envoyproxy.controlplane.cache.XdsRequest;
import io.envoyproxy.controlplane.cache.v3.SimpleCache;
import io.envoyproxy.controlplane.cache.v3.Snapshot;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;

/**
 * java-control-plane's snapshot cache, except that an update an Envoy rejected is offered to it again with the next
 * snapshot, and not before.
 *
 * <p>The cache answers a delta stream's watch on a new snapshot with the resources that changed since the previous
 * snapshot, less those the Envoy holds at their version. A rejected update leaves the Envoy without the resources it
 * carried (java-control-plane tracks only what was acknowledged), and when the next snapshot does not change them
 * they are never among the candidates: a worker added in a rejected update stayed out of that Envoy, and out of
 * routing ({@link EnvoyClusters}), until the Envoy reconnected, however the operator fixed the fleet. A NACK's watch
 * is therefore held here, not in the cache, until the next snapshot, and then opened as a reconnecting Envoy's is,
 * holding nothing of that snapshot's version: the cache answers it at once with the whole difference between the
 * snapshot and what the Envoy acknowledged. Not at the NACK itself, when the same update would be rejected again; a
 * NACK of an update older than the snapshot is answered at once, as the cache does.
 *
 * <p>A state-of-the-world NACK carries the version the Envoy last accepted, so the cache answered it at once with the
 * current snapshot: the update just rejected, rejected again, resent again, for as long as it stayed current and as
 * fast as the two could exchange it. The request does not say which update it rejects; {@link XdsServer} does (the
 * version of the stream's last response, {@link #rejecting}), and a NACK of the current snapshot's update opens its
 * watch as if the Envoy held that version: the next snapshot is sent, whole, as ever.
 */
final class RejectionAwareCache extends SimpleCache<String> {

  private final NodeGroup<String> groups;
  /** Watches of streams that rejected the current snapshot's update, until the next one; guarded by this. */
  private final List<DeltaWatch> rejected = new ArrayList<>();
  /**
   * The update the state-of-the-world NACK being read on this thread rejects. java-control-plane runs the request
   * callbacks and then creates the request's watch on the thread that read the request.
   */
  private static final ThreadLocal<Rejection> REJECTING = new ThreadLocal<>();

  private record Rejection(DiscoveryRequest nack, String version) {}

  RejectionAwareCache(NodeGroup<String> groups) {
    super(groups);
    this.groups = groups;
  }

  /** {@code nack}, about to be read on this thread, rejects the update of snapshot version {@code version}. */
  static void rejecting(DiscoveryRequest nack, String version) {
    REJECTING.set(new Rejection(nack, version));
  }

  @Override
  public Watch createWatch(boolean ads, XdsRequest request, Set<String> knownResourceNames,
      Consumer<Response> responseConsumer, boolean hasClusterChanged, boolean allowDefaultEmptyEdsUpdate) {
    Rejection r = REJECTING.get();
    if (r != null && r.nack() == request.v3Request()) {
      REJECTING.remove();
      synchronized (this) {
        Snapshot current = getSnapshot(groups.hash(request.v3Request().getNode()));
        XdsRequest asked = current != null
            && current.version(request.getResourceType(), request.getResourceNamesList()).equals(r.version())
            ? XdsRequest.create(request.v3Request().toBuilder().setVersionInfo(r.version()).build()) : request;
        return super.createWatch(ads, asked, knownResourceNames, responseConsumer, hasClusterChanged,
            allowDefaultEmptyEdsUpdate);
      }
    }
    return super.createWatch(ads, request, knownResourceNames, responseConsumer, hasClusterChanged,
        allowDefaultEmptyEdsUpdate);
  }

  @Override
  public DeltaWatch createDeltaWatch(DeltaXdsRequest request, String requesterVersion,
      Map<String, String> resourceVersions, Set<String> pendingResources, boolean isWildcard,
      Consumer<DeltaResponse> responseConsumer, boolean hasClusterChanged) {
    if (request.hasErrorDetail()) {
      // under the lock setSnapshot holds: a snapshot set between the check and the parking would never reach it
      synchronized (this) {
        Snapshot current = getSnapshot(groups.hash(request.v3Request().getNode()));
        if (current != null && current.version(request.getResourceType(), List.of()).equals(requesterVersion)) {
          rejected.removeIf(AbstractWatch::isCancelled); // the stream closed, or asked again since
          DeltaWatch parked = new DeltaWatch(request, Map.copyOf(resourceVersions), Set.copyOf(pendingResources),
              requesterVersion, isWildcard, responseConsumer);
          rejected.add(parked);
          return parked;
        }
      }
    }
    return super.createDeltaWatch(request, requesterVersion, resourceVersions, pendingResources, isWildcard,
        responseConsumer, hasClusterChanged);
  }

  @Override
  public synchronized void setSnapshot(String group, Snapshot snapshot) {
    super.setSnapshot(group, snapshot);
    List<DeltaWatch> again = new ArrayList<>(rejected);
    rejected.clear();
    for (DeltaWatch parked : again) {
      if (parked.isCancelled()) {
        continue;
      }
      // "" as the version held: answered as a reconnect is, with all the Envoy has not acknowledged
      DeltaWatch open = super.createDeltaWatch(parked.request(), "", parked.trackedResources(),
          parked.pendingResources(), parked.isWildcard(), response -> {
            try {
              parked.respond(response);
            } catch (WatchCancelledException e) {
              // the stream moved on meanwhile: its new watch answers it
            }
          }, false);
      // java-control-plane holds the parked watch and cancels that one when the stream closes or asks again
      parked.setStop(open::cancel);
      if (parked.isCancelled()) {
        open.cancel();
      }
    }
  }
}
