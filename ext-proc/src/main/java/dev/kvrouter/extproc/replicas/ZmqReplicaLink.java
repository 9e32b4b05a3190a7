package dev.kvrouter.extproc.replicas;

import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The replicas' channel: every replica binds one ZMQ PUB socket and subscribes to every other's, the transport
 * Dynamo's router replicas and vLLM's KV events use too. One thread owns both sockets (ZMQ sockets are not
 * thread-safe): it sends what request threads queued, applies what peers sent, heartbeats every second and drops
 * silent peers. Request threads only offer to a bounded queue; when it is full the message is dropped and
 * counted, never waited for.
 */
public final class ZmqReplicaLink implements Consumer<byte[]>, AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(ZmqReplicaLink.class);
  private static final long HEARTBEAT_NANOS = TimeUnit.SECONDS.toNanos(1);

  private final String bind;
  private final List<String> peers;
  private final BlockingQueue<byte[]> queue;
  private final AtomicLong dropped = new AtomicLong();
  private final ZContext context = new ZContext();
  private ReplicaSync sync;
  private Thread thread;
  private volatile boolean running;
  private volatile int boundPort = -1;

  /**
   * @param bind where this replica publishes, e.g. {@code tcp://0.0.0.0:5601} ({@code :0} or {@code :*} picks a
   *     free port: {@link #port()})
   * @param peers the other replicas' publish endpoints
   * @param queueCapacity messages waiting to be sent at most
   */
  public ZmqReplicaLink(String bind, List<String> peers, int queueCapacity) {
    this.bind = bind;
    this.peers = List.copyOf(peers);
    this.queue = new ArrayBlockingQueue<>(queueCapacity);
  }

  /** Queues one message for every peer. Never blocks. */
  @Override
  public void accept(byte[] message) {
    if (!queue.offer(message) && dropped.getAndIncrement() == 0) {
      log.warn("the replica link's send queue is full: dropping messages to the other router replicas");
    }
  }

  /** Starts the link's thread, applying what peers send to {@code sync}. Returns once the PUB socket is bound. */
  public ZmqReplicaLink start(ReplicaSync sync) throws InterruptedException {
    this.sync = sync;
    running = true;
    java.util.concurrent.CountDownLatch bound = new java.util.concurrent.CountDownLatch(1);
    RuntimeException[] failure = new RuntimeException[1];
    thread = new Thread(() -> run(bound, failure), "kvrouter-replicas");
    thread.setDaemon(true);
    thread.start();
    bound.await();
    if (failure[0] != null) {
      throw failure[0];
    }
    return this;
  }

  /** The port the PUB socket is bound to. */
  public int port() {
    return boundPort;
  }

  /** Messages dropped because the send queue was full, since start. */
  public long dropped() {
    return dropped.get();
  }

  private void run(java.util.concurrent.CountDownLatch bound, RuntimeException[] failure) {
    ZMQ.Socket pub;
    ZMQ.Socket sub;
    try {
      pub = context.createSocket(SocketType.PUB);
      pub.setSndHWM(100_000); // a slow peer drops messages past this instead of holding memory
      pub.setLinger(0);
      String endpoint = bind.endsWith(":0") ? bind.substring(0, bind.length() - 1) + "*" : bind;
      pub.bind(endpoint);
      String last = pub.getLastEndpoint();
      boundPort = Integer.parseInt(last.substring(last.lastIndexOf(':') + 1));
      sub = context.createSocket(SocketType.SUB);
      sub.setRcvHWM(100_000);
      sub.setLinger(0);
      sub.subscribe(new byte[0]);
      for (String p : peers) {
        sub.connect(p);
      }
    } catch (RuntimeException e) {
      failure[0] = e;
      bound.countDown();
      return;
    }
    bound.countDown();
    log.info("router replicas: publishing on {}, following {}", pub.getLastEndpoint(), peers);
    ZMQ.Poller poller = context.createPoller(1);
    poller.register(sub, ZMQ.Poller.POLLIN);
    long nextBeat = 0;
    try {
      while (running && !Thread.currentThread().isInterrupted()) {
        for (byte[] m; (m = queue.poll()) != null; ) {
          pub.send(m, ZMQ.DONTWAIT);
        }
        long now = System.nanoTime();
        if (now - nextBeat >= 0) {
          sync.heartbeat();
          sync.expireSilent();
          nextBeat = now + HEARTBEAT_NANOS;
        }
        // wake at least every 2 ms to send what request threads queued
        if (poller.poll(2) > 0 && poller.pollin(0)) {
          for (byte[] m; (m = sub.recv(ZMQ.DONTWAIT)) != null; ) {
            sync.apply(m);
          }
        }
      }
    } catch (org.zeromq.ZMQException e) {
      if (running) {
        log.warn("the replica link stopped: {}", e.toString());
      }
    } finally {
      poller.close();
    }
  }

  @Override
  public void close() {
    running = false;
    if (thread != null) {
      try {
        thread.join(2_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    context.close();
  }
}
