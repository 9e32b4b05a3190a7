package dev.kvrouter.index.events;

import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The subscriber's socket settings in one place.
 *
 * <p>Every socket gets a short ZMTP handshake interval: JeroMQ 0.6.0 occasionally stalls a handshake forever
 * (connected and accepted, never handshaken; about 1 connection in 100 in our tests, zeromq/jeromq#849), and
 * with the 30 s default such a socket stays deaf for 30 s. With a short interval ZMQ drops the stalled
 * connection and reconnects; queued outgoing messages (a replay request) survive the reconnect.
 */
final class ZmqSockets {

  private ZmqSockets() {}

  /** A SUB socket for {@code endpoint} (not yet connected or bound to it). */
  static ZMQ.Socket sub(ZContext ctx, SubscriberConfig config, String endpoint) {
    ZMQ.Socket s = ctx.createSocket(SocketType.SUB);
    s.setIPv6(ipv6(endpoint));
    s.setLinger(0);
    s.setRcvHWM(config.receiveHwm());
    s.setMaxMsgSize(config.maxMessageBytes());
    s.setReconnectIVL(config.reconnectMillis());
    s.setReconnectIVLMax(config.reconnectMaxMillis());
    s.setHandshakeIvl(config.handshakeMillis());
    return s;
  }

  /**
   * In a disconnect hook (which runs on ZMQ's I/O thread): whether ZMQ ended the connection for a message over the
   * size limit. It says so only through that thread's errno.
   */
  static boolean oversize() {
    return new zmq.util.Errno().get() == zmq.ZError.EMSGSIZE;
  }

  /**
   * JeroMQ refuses an IPv6 address unless the socket allows IPv6 ("not found matching IPv4/IPv6 settings"), so a
   * worker at {@code tcp://[fd00::5]:5557} would never be followed. Only bracketed IPv6 literals turn it on: a
   * host name on an IPv6-enabled socket may resolve to an IPv6 address the engine does not listen on.
   */
  static boolean ipv6(String endpoint) {
    return endpoint != null && endpoint.startsWith("tcp://[");
  }

  /**
   * A DEALER for replay requests, connected to {@code endpoint}; {@code onOversize} runs on ZMQ's I/O thread each
   * time it drops the connection for a message over {@code maxMessageBytes}.
   */
  static ZMQ.Socket dealer(ZContext ctx, String endpoint, int timeoutMillis, int reconnectMillis,
      int handshakeMillis, int maxMessageBytes, Runnable onOversize) {
    ZMQ.Socket d = ctx.createSocket(SocketType.DEALER);
    d.setIPv6(ipv6(endpoint));
    d.setLinger(0);
    d.setMaxMsgSize(maxMessageBytes);
    d.setEventHook(event -> {
      if (oversize()) {
        onOversize.run();
      }
    }, ZMQ.EVENT_DISCONNECTED);
    d.setReceiveTimeOut(timeoutMillis);
    d.setSendTimeOut(timeoutMillis);
    d.setReconnectIVL(reconnectMillis);
    d.setHandshakeIvl(handshakeMillis);
    try {
      d.connect(endpoint);
    } catch (RuntimeException e) {
      ctx.destroySocket(d); // the caller never gets it to close
      throw e;
    }
    return d;
  }
}
