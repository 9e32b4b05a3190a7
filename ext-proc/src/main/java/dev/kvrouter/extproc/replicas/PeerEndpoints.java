package dev.kvrouter.extproc.replicas;

import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Predicate;

/**
 * The other replicas' publish endpoints as DNS has them now. Each configured peer ({@code tcp://<host>:<port>}) stands
 * for every address its name resolves to, so one kvrouter.yaml can serve a whole replica set: list a headless
 * Service ({@code tcp://kvrouter-replicas.<namespace>.svc:5601}) and every pod follows every other, including pods
 * that come later. This replica's own address (a local address with its own port) is left out (its own messages
 * would be ignored anyway), and so are IPv6 addresses: replicas publish on IPv4. A name that fails to resolve keeps the endpoints it had (a DNS blip must not cut the
 * replicas apart); a name that resolves to fewer addresses drops the others (scaled down or rescheduled).
 */
final class PeerEndpoints {

  /** A DNS lookup: every address of {@code host}. */
  @FunctionalInterface
  interface Dns {
    InetAddress[] lookup(String host) throws UnknownHostException;
  }

  private final List<String> peers;
  private final Dns dns;
  private final Predicate<InetAddress> local;
  /** The endpoints each configured peer last resolved to. */
  private final Map<String, Set<String>> resolved = new LinkedHashMap<>();

  /**
   * @param peers configured peers, {@code tcp://<host>:<port>}
   * @param dns the lookup ({@code InetAddress::getAllByName} in production)
   * @param local whether an address is one of this host's
   */
  PeerEndpoints(List<String> peers, Dns dns, Predicate<InetAddress> local) {
    this.peers = List.copyOf(peers);
    this.dns = dns;
    this.local = local;
  }

  /**
   * Looks every peer up again and returns all endpoints to follow, sorted, without this replica's own ({@code
   * ownPort} on a local address).
   */
  Set<String> refresh(int ownPort) {
    Set<String> all = new TreeSet<>();
    for (String peer : peers) {
      int colon = peer.lastIndexOf(':');
      String host = peer.substring("tcp://".length(), colon);
      int port = Integer.parseInt(peer.substring(colon + 1));
      Set<String> endpoints = new TreeSet<>();
      try {
        for (InetAddress a : dns.lookup(host)) {
          // replicas publish on IPv4 (replicas.bind); a dual-stack name's IPv6 addresses lead nowhere
          if (a instanceof Inet6Address || port == ownPort && local.test(a)) {
            continue;
          }
          endpoints.add("tcp://" + a.getHostAddress() + ":" + port);
        }
        resolved.put(peer, endpoints);
      } catch (UnknownHostException e) {
        // keep what it resolved to before (nothing, the first time)
      }
      all.addAll(resolved.getOrDefault(peer, Set.of()));
    }
    return all;
  }
}
