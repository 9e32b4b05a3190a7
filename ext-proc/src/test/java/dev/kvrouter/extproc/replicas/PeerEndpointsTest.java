package dev.kvrouter.extproc.replicas;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PeerEndpointsTest {

  static InetAddress ip(String literal) {
    try {
      return InetAddress.getByName(literal);
    } catch (UnknownHostException e) {
      throw new IllegalStateException(e);
    }
  }

  final Map<String, InetAddress[]> records = new HashMap<>();
  final PeerEndpoints.Dns dns = host -> {
    InetAddress[] a = records.get(host);
    if (a == null) {
      throw new UnknownHostException(host);
    }
    return a;
  };

  @Test
  void aNameStandsForEveryAddressItResolvesToButThisReplicasOwn() {
    // a headless Service over three pods, this one 10.0.0.2
    records.put("kvrouter-replicas.ns.svc", new InetAddress[] {ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3")});
    records.put("router-x", new InetAddress[] {ip("10.0.0.2")});
    PeerEndpoints p = new PeerEndpoints(List.of("tcp://kvrouter-replicas.ns.svc:5601", "tcp://router-x:5602"), dns,
        a -> a.equals(ip("10.0.0.2")));
    // this replica publishes on 5601: 10.0.0.2:5601 is itself; 10.0.0.2:5602 is another replica on this host
    assertThat(p.refresh(5601)).containsExactly("tcp://10.0.0.1:5601", "tcp://10.0.0.2:5602", "tcp://10.0.0.3:5601");
  }

  @Test
  void aFailedLookupKeepsWhatTheNameHadAndAShorterAnswerDropsTheRest() {
    records.put("replicas", new InetAddress[] {ip("10.0.0.1"), ip("10.0.0.3")});
    PeerEndpoints p = new PeerEndpoints(List.of("tcp://replicas:5601", "tcp://later:5601"), dns, a -> false);
    assertThat(p.refresh(5601)).as("a name that never resolved follows nothing")
        .containsExactly("tcp://10.0.0.1:5601", "tcp://10.0.0.3:5601");
    records.remove("replicas");
    assertThat(p.refresh(5601)).as("DNS down").containsExactly("tcp://10.0.0.1:5601", "tcp://10.0.0.3:5601");
    records.put("replicas", new InetAddress[] {ip("10.0.0.3")});
    records.put("later", new InetAddress[] {ip("10.0.0.9")});
    assertThat(p.refresh(5601)).containsExactly("tcp://10.0.0.3:5601", "tcp://10.0.0.9:5601");
  }

  @Test
  void aDualStackNamesIpv6AddressesAreLeftOut() {
    // replicas publish on IPv4 (replicas.bind takes no IPv6 literal)
    records.put("replicas", new InetAddress[] {ip("fd00::1"), ip("10.0.0.1")});
    assertThat(new PeerEndpoints(List.of("tcp://replicas:5601"), dns, a -> false).refresh(0))
        .containsExactly("tcp://10.0.0.1:5601");
  }
}
