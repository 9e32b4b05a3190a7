package dev.kvrouter.index.events;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * Regression test for JeroMQ's stalled handshakes (zeromq/jeromq#849): without a short handshake interval
 * about one SUB socket in a hundred never receives anything for 30 s. With the subscriber's settings every
 * socket must receive within seconds.
 */
@Timeout(120)
class ZmqSocketsTest {

  @Test
  void everySubscriberSocketReceivesDespiteStalledHandshakes() {
    SubscriberConfig config = SubscriberConfig.defaults();
    try (ZContext pubCtx = new ZContext(1); ZContext subCtx = new ZContext(1)) {
      ZMQ.Socket pub = pubCtx.createSocket(SocketType.PUB);
      pub.setLinger(0);
      pub.bind("tcp://127.0.0.1:*");
      String endpoint = pub.getLastEndpoint();
      long worstMillis = 0;
      for (int i = 0; i < 250; i++) {
        ZMQ.Socket sub = ZmqSockets.sub(subCtx, config, endpoint);
        sub.subscribe(new byte[0]);
        sub.connect(endpoint);
        sub.setReceiveTimeOut(5);
        long t0 = System.nanoTime();
        byte[] got = null;
        while (got == null && System.nanoTime() - t0 < 10_000_000_000L) {
          pub.send("probe");
          got = sub.recv(0);
        }
        worstMillis = Math.max(worstMillis, (System.nanoTime() - t0) / 1_000_000);
        assertThat(got).as("socket %d received within 10 s", i).isNotNull();
        subCtx.destroySocket(sub);
      }
      // a stalled handshake costs one handshake interval plus a reconnect, never the 30 s default
      assertThat(worstMillis).isLessThan(config.handshakeMillis() * 5L);
    }
  }

  /** workers.yaml accepts IPv6 workers; their event endpoints (tcp://[v6]:port) must be followed like any other. */
  @Test
  void anIpv6EndpointIsFollowed() throws Exception {
    SubscriberConfig config = SubscriberConfig.defaults();
    try (ZContext ctx = new ZContext(1)) {
      ZMQ.Socket pub = ctx.createSocket(SocketType.PUB);
      pub.setLinger(0);
      pub.setIPv6(true);
      pub.bind("tcp://[::1]:*");
      String endpoint = pub.getLastEndpoint();
      assertThat(endpoint).startsWith("tcp://[");
      ZMQ.Socket sub = ZmqSockets.sub(ctx, config, endpoint);
      sub.subscribe(new byte[0]);
      sub.connect(endpoint);
      sub.setReceiveTimeOut(50);
      byte[] got = null;
      for (int i = 0; i < 100 && got == null; i++) {
        pub.send("probe");
        got = sub.recv(0);
      }
      assertThat(got).isNotNull();
      ZMQ.Socket dealer = ZmqSockets.dealer(ctx, endpoint, 100, 100, 1000, 1 << 20, () -> { });
      assertThat(dealer).isNotNull(); // connecting no longer throws "not found matching IPv4/IPv6 settings"
    }
  }
}
