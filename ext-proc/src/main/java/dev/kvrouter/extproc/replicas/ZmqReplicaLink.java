package dev.kvrouter.extproc.replicas;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.nio.ByteBuffer;
import java.nio.channels.Pipe;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
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
 * silent peers. Request threads only offer to a queue bounded in messages and bytes; when it is full the message is
 * dropped and counted, never waited for. The thread sleeps in one poll over the peers' socket and a wake-up pipe until a
 * message comes in, one is queued (the first queued after it emptied the queue writes one byte there), or the next
 * heartbeat is due, so a message leaves at once and an idle link costs next to nothing (ReplicaLinkBench). Both
 * sockets give a connection 1 s to complete its ZMTP handshake: JeroMQ 0.6.0 sometimes connects a socket and never
 * handshakes it (zeromq/jeromq#849; the cause is named in the open zeromq/jeromq#1022), which with the 30 s
 * default left a replica deaf to a peer for 30 s. Peers are names looked up again every {@code resolveEvery} on a
 * thread of their own ({@link PeerEndpoints}: a headless Service's name follows the pods as they come and go); the
 * link thread only connects to new endpoints and disconnects from gone ones.
 *
 * <p>With {@link CurveKeys} (kvrouter.yaml {@code replicas.curve}) the link is authenticated and encrypted by ZMQ's
 * CURVE: the PUB socket is a CURVE server that admits only subscribers proving they hold the link's key pair (a ZAP
 * handler on a thread of its own answers the handshakes, bound before the PUB socket is), and the SUB socket a CURVE
 * client that trusts only publishers holding its secret key. A member without the key, or with another, completes no
 * handshake: it neither reads this replica's messages nor gets any of its own applied here. Without it (the
 * default) anyone who reaches the bind port reads every message, and a process at a peer's address is trusted.
 */
public final class ZmqReplicaLink implements Consumer<byte[]>, AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(ZmqReplicaLink.class);
  private static final long HEARTBEAT_NANOS = TimeUnit.SECONDS.toNanos(1);
  /** A connection whose handshake has not completed by then is dropped and made again (see the class comment). */
  private static final int HANDSHAKE_MILLIS = 1000;
  /** How long close waits for the messages the thread sent last; a peer that is gone holds it up no longer. */
  private static final int CLOSE_LINGER_MILLIS = 500;
  /** Peers' messages applied at most between two looks at the send queue and the heartbeat's time. */
  private static final int RECEIVE_BATCH = 256;

  private final String bind;
  private final List<String> peers;
  private final PeerEndpoints endpoints;
  private final long resolveNanos;
  /** The endpoints to follow, as the last lookup found them; the link thread connects to what changed. */
  private final AtomicReference<Set<String>> wanted = new AtomicReference<>(Set.of());
  private volatile int following;
  private ScheduledExecutorService resolver;
  private final BlockingQueue<byte[]> queue;
  /**
   * Bytes the send queue may hold at once, besides its count: a reservation carries its prompt's block hashes (up to
   * 8 MiB), so a count alone bounded nothing while the link thread is held up. Room for two of the largest
   * messages.
   */
  static final long MAX_QUEUED_BYTES = 2L * ReplicaSync.MAX_MESSAGE_BYTES;
  private final AtomicLong queuedBytes = new AtomicLong();
  private final AtomicLong dropped = new AtomicLong();
  /** Wakes the link thread when a message is queued; {@link #signalled} keeps it to one byte per drain. */
  private final Pipe wake;
  private final AtomicBoolean signalled = new AtomicBoolean();
  private final ZContext context = new ZContext();
  private ReplicaSync sync;
  private Thread thread;
  /** This replica's publishing socket; link thread. */
  private ZMQ.Socket pub;
  private volatile boolean running;
  private volatile int boundPort = -1;
  /** Peer messages whose apply threw; link thread. */
  private long failedMessages;
  /** The link's CURVE key pair; null: plain ZMTP, as before. */
  private final CurveKeys curve;
  /** Answers the PUB socket's ZAP requests with CURVE; null without it. */
  private Thread zap;
  private volatile boolean zapRunning;
  private final AtomicLong refused = new AtomicLong();
  /** ZMQ's fixed endpoint for the ZAP handler of a context (rfc.zeromq.org/spec:27/ZAP). */
  static final String ZAP_ENDPOINT = "inproc://zeromq.zap.01";

  /**
   * @param bind where this replica publishes, e.g. {@code tcp://0.0.0.0:5601} ({@code :0} or {@code :*} picks a
   *     free port: {@link #port()})
   * @param peers the other replicas' publish endpoints
   * @param queueCapacity messages waiting to be sent at most
   */
  public ZmqReplicaLink(String bind, List<String> peers, int queueCapacity) {
    this(bind, peers, queueCapacity, Duration.ofSeconds(5));
  }

  /** @param resolveEvery how often the peers' names are looked up again */
  public ZmqReplicaLink(String bind, List<String> peers, int queueCapacity, Duration resolveEvery) {
    this(bind, peers, queueCapacity, resolveEvery, InetAddress::getAllByName);
  }

  /** @param curve the link's key pair ({@code replicas.curve}), or null for none */
  public ZmqReplicaLink(String bind, List<String> peers, int queueCapacity, Duration resolveEvery,
      CurveKeys curve) {
    this(bind, peers, queueCapacity, resolveEvery, InetAddress::getAllByName, curve);
  }

  /** @param dns the lookup (tests answer it themselves) */
  ZmqReplicaLink(String bind, List<String> peers, int queueCapacity, Duration resolveEvery, PeerEndpoints.Dns dns) {
    this(bind, peers, queueCapacity, resolveEvery, dns, null);
  }

  ZmqReplicaLink(String bind, List<String> peers, int queueCapacity, Duration resolveEvery, PeerEndpoints.Dns dns,
      CurveKeys curve) {
    this.curve = curve;
    this.bind = bind;
    this.peers = List.copyOf(peers);
    this.queue = new ArrayBlockingQueue<>(queueCapacity);
    this.endpoints = new PeerEndpoints(peers, dns, ZmqReplicaLink::local);
    this.resolveNanos = resolveEvery.toNanos();
    try {
      wake = Pipe.open();
      wake.source().configureBlocking(false);
      wake.sink().configureBlocking(false);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot open the replica link's wake-up pipe", e);
    }
  }

  /** Whether {@code a} is an address of this host. */
  static boolean local(InetAddress a) {
    try {
      return a.isAnyLocalAddress() || NetworkInterface.getByInetAddress(a) != null;
    } catch (SocketException e) {
      return false;
    }
  }

  /** Queues one message for every peer. Never blocks. */
  @Override
  public void accept(byte[] message) {
    if (!offer(message) && !(Thread.currentThread() == thread && flushThenOffer(message))) {
      if (dropped.getAndIncrement() == 0) {
        log.warn("the replica link's send queue is full: dropping messages to the other router replicas");
      }
      return;
    }
    wakeUp();
  }

  /**
   * The link thread's own messages (what it resends to a replica that joins) would fill the queue it alone
   * empties: it sends what is queued first, so nothing is dropped and the order stays. Link thread.
   */
  private boolean flushThenOffer(byte[] message) {
    if (pub == null) {
      return false;
    }
    flush();
    return offer(message);
  }

  /** Queues within both bounds, the messages' count and their bytes. */
  private boolean offer(byte[] message) {
    if (queuedBytes.addAndGet(message.length) > MAX_QUEUED_BYTES || !queue.offer(message)) {
      queuedBytes.addAndGet(-message.length);
      return false;
    }
    return true;
  }

  /** Sends everything queued. Link thread. */
  private void flush() {
    for (byte[] m; (m = queue.poll()) != null; ) {
      queuedBytes.addAndGet(-m.length);
      pub.send(m, ZMQ.DONTWAIT);
    }
  }

  /** Wakes the link thread from its poll, unless a wake-up is already pending. */
  private void wakeUp() {
    if (!signalled.get() && signalled.compareAndSet(false, true)) {
      try {
        wake.sink().write(ByteBuffer.wrap(WAKE_BYTE));
      } catch (IOException e) {
        // closed: the link is stopping
      }
    }
  }

  private static final byte[] WAKE_BYTE = {1};

  /** Starts the link's thread, applying what peers send to {@code sync}. Returns once the PUB socket is bound. */
  public ZmqReplicaLink start(ReplicaSync sync) throws InterruptedException {
    this.sync = sync;
    running = true;
    CountDownLatch bound = new CountDownLatch(1);
    RuntimeException[] failure = new RuntimeException[1];
    thread = new Thread(() -> run(bound, failure), "kvrouter-replicas");
    thread.setDaemon(true);
    thread.start();
    bound.await();
    if (failure[0] != null) {
      throw failure[0];
    }
    // the first lookup before returning, so the link follows its peers from the start; then on a thread of its own,
    // since a slow DNS must not hold up the link thread's sends
    wanted.set(endpoints.refresh(boundPort));
    wakeUp();
    resolver = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "kvrouter-replicas-dns");
      t.setDaemon(true);
      return t;
    });
    resolver.scheduleWithFixedDelay(() -> {
      try {
        Set<String> next = endpoints.refresh(boundPort);
        if (!next.equals(wanted.get())) {
          wanted.set(next);
          wakeUp();
        }
      } catch (RuntimeException e) {
        log.warn("looking up the other router replicas failed: {}", e.toString());
      }
    }, resolveNanos, resolveNanos, TimeUnit.NANOSECONDS);
    return this;
  }

  /** Peer endpoints the link follows now (each configured name's addresses, this replica's own left out). */
  public int following() {
    return following;
  }

  /** The port the PUB socket is bound to. */
  public int port() {
    return boundPort;
  }

  /** Messages waiting to be sent now. */
  public int queued() {
    return queue.size();
  }

  /** Bytes of the messages waiting to be sent now. */
  public long queuedBytes() {
    return queuedBytes.get();
  }

  /** Messages dropped because the send queue was full, since start. */
  public long dropped() {
    return dropped.get();
  }

  /** Whether the link is CURVE-authenticated and encrypted. */
  public boolean curve() {
    return curve != null;
  }

  /**
   * Subscribers refused by the ZAP check since start: they knew the link's public key but hold another pair. One
   * without CURVE or with another public key fails earlier in the handshake and is not counted. Each connection
   * attempt counts, and ZMQ retries one every 100 ms or so.
   */
  public long refused() {
    return refused.get();
  }

  private void run(CountDownLatch bound, RuntimeException[] failure) {
    ZMQ.Socket sub;
    try {
      if (curve != null) {
        startZap(); // before the PUB socket is bound: no handshake is ever answered without it
      }
      pub = context.createSocket(SocketType.PUB);
      if (curve != null) {
        pub.setZapDomain("kvrouter-replicas");
        pub.setCurveServer(true);
        pub.setCurveSecretKey(curve.secretKey());
      }
      pub.setSndHWM(100_000); // a slow peer drops messages past this instead of holding memory
      pub.setLinger(0);
      pub.setHandshakeIvl(HANDSHAKE_MILLIS);
      String endpoint = bind.endsWith(":0") ? bind.substring(0, bind.length() - 1) + "*" : bind;
      pub.bind(endpoint);
      String last = pub.getLastEndpoint();
      boundPort = Integer.parseInt(last.substring(last.lastIndexOf(':') + 1));
      sub = context.createSocket(SocketType.SUB);
      sub.setRcvHWM(100_000);
      // ZMQ allocates a frame as its header claims before reading it: without a cap one peer's header claiming
      // gigabytes costs the heap that much; a larger frame than any replica sends drops that connection instead
      sub.setMaxMsgSize(ReplicaSync.MAX_MESSAGE_BYTES);
      sub.setLinger(0);
      sub.setHandshakeIvl(HANDSHAKE_MILLIS);
      if (curve != null) {
        sub.setCurveServerKey(curve.publicKey());
        sub.setCurvePublicKey(curve.publicKey());
        sub.setCurveSecretKey(curve.secretKey());
      }
      sub.subscribe(new byte[0]);
    } catch (RuntimeException e) {
      failure[0] = e;
      bound.countDown();
      return;
    }
    bound.countDown();
    log.info("router replicas: publishing on {}{}, peers {}", pub.getLastEndpoint(),
        curve != null ? " (CURVE: authenticated and encrypted)" : "", peers);
    ZMQ.Poller poller = context.createPoller(2);
    poller.register(sub, ZMQ.Poller.POLLIN);
    poller.register(wake.source(), ZMQ.Poller.POLLIN);
    ByteBuffer wakeBytes = ByteBuffer.allocate(64);
    long nextBeat = 0;
    Set<String> followed = Set.of();
    boolean backlog = false;
    try {
      while (running && !Thread.currentThread().isInterrupted()) {
        // clear the flag before looking at what woke the thread: a message queued or endpoints changed after this
        // point write a new byte and wake the poll
        while (wake.source().read(wakeBytes.clear()) > 0) {
          // drained
        }
        signalled.set(false);
        Set<String> want = wanted.get();
        if (want != followed) {
          follow(sub, followed, want);
          followed = want;
          following = want.size();
        }
        flush();
        long now = System.nanoTime();
        if (now - nextBeat >= 0) {
          sync.heartbeat();
          // what the peers sent while this thread was held up (a pause, a slow heartbeat) first: that time was not
          // their silence
          backlog |= receive(sub);
          sync.expireSilent();
          nextBeat = now + HEARTBEAT_NANOS;
        }
        // sleep until a peer's message, a queued one, a wake-up (new endpoints, close) or the next heartbeat; not
        // with messages still waiting from the last round
        if (!backlog) {
          long waitMillis = Math.max(1, TimeUnit.NANOSECONDS.toMillis(nextBeat - now));
          poller.poll(waitMillis);
        }
        // read on every wake, not only when the poll flags the socket: one non-blocking receive, and nothing left
        // waiting on how JeroMQ reports a socket's readiness
        backlog = receive(sub);
      }
      // what was queued before close (the releases of the last requests) goes out too: the others would count it
      // until the peer timeout; close lingers for it
      flush();
    } catch (org.zeromq.ZMQException | IOException e) {
      if (running) {
        log.warn("the replica link stopped: {}", e.toString());
      }
    } catch (RuntimeException | Error e) {
      // not swallowed (an Error is the JVM's, not one message's), but said loudly: from here on this replica
      // neither hears nor tells the others, and its copies of theirs stay until they expire
      log.error("the replica link thread died: this replica no longer shares its reservations", e);
      throw e;
    } finally {
      poller.close();
    }
  }

  /**
   * Applies the messages waiting in {@code sub}, at most a batch: peers sending faster than this thread applies kept
   * it reading, and it neither sent what requests queued nor heartbeated, so the others dropped this replica as
   * silent. Returns whether the batch filled (more may wait). Link thread.
   */
  private boolean receive(ZMQ.Socket sub) {
    int received = 0;
    for (byte[] m; received < RECEIVE_BATCH && (m = sub.recv(ZMQ.DONTWAIT)) != null; received++) {
      try {
        sync.apply(m);
      } catch (RuntimeException e) {
        // one message must not end the only thread that hears and tells the other replicas
        if (failedMessages++ == 0) {
          log.warn("a message from another router replica failed to apply: {}", e.toString());
        }
      }
    }
    return received == RECEIVE_BATCH;
  }


  /**
   * Binds the context's ZAP handler and answers it on a thread of its own: a subscriber is admitted when its CURVE
   * public key is the link's (its handshake proved it holds the secret key too), refused otherwise. Link thread,
   * before the PUB socket exists.
   */
  private void startZap() {
    ZMQ.Socket handler = context.createSocket(SocketType.REP);
    handler.setLinger(0);
    handler.bind(ZAP_ENDPOINT); // a blocking receive: woken by a request, or by close's last message
    zapRunning = true;
    zap = new Thread(() -> answerZap(handler), "kvrouter-replicas-zap");
    zap.setDaemon(true);
    zap.start();
  }

  /**
   * ZAP 1.0: a request is version, request id, domain, address, routing id, mechanism and the credentials (for
   * CURVE the client's 32-byte public key); the reply version, request id, status code and text, user id and
   * metadata. ZAP thread.
   */
  private void answerZap(ZMQ.Socket handler) {
    try {
      while (zapRunning) {
        org.zeromq.ZMsg request = org.zeromq.ZMsg.recvMsg(handler);
        if (!zapRunning) {
          break; // close's wake-up (or a handshake that came with it: the link sends nothing more)
        }
        if (request == null) {
          continue;
        }
        String version = request.popString();
        String requestId = request.popString();
        request.popString(); // domain
        String address = request.popString();
        request.popString(); // routing id
        String mechanism = request.popString();
        org.zeromq.ZFrame key = request.pop();
        boolean ok = "1.0".equals(version) && "CURVE".equals(mechanism) && key != null
            && key.size() == 32 && curve.isPublicKey(key.getData());
        if (!ok && refused.getAndIncrement() == 0) {
          // the address only: a key is never logged
          log.warn("router replicas: refused a subscriber from {} that does not hold replicas.curve's key pair "
              + "(counted in kvrouter_replicas_refused_total)", address);
        }
        org.zeromq.ZMsg reply = new org.zeromq.ZMsg();
        reply.add("1.0");
        reply.add(requestId == null ? "" : requestId);
        reply.add(ok ? "200" : "400");
        reply.add(ok ? "OK" : "not the replica link's key");
        reply.add("");
        reply.add(new byte[0]);
        reply.send(handler);
      }
    } catch (org.zeromq.ZMQException | zmq.ZError.CtxTerminatedException e) {
      // the context closed: the link is stopping
    } catch (RuntimeException e) {
      if (zapRunning) {
        log.error("the replica link's CURVE handler died: no subscriber is admitted any more", e);
      }
    }
  }

  /** Connects to the endpoints new in {@code want} and disconnects from those gone since {@code followed}. */
  private static void follow(ZMQ.Socket sub, Set<String> followed, Set<String> want) {
    for (String e : followed) {
      if (!want.contains(e)) {
        sub.disconnect(e);
        log.info("router replicas: no longer following {}", e);
      }
    }
    for (String e : want) {
      if (!followed.contains(e)) {
        sub.connect(e);
        log.info("router replicas: following {}", e);
      }
    }
  }

  @Override
  public void close() {
    running = false;
    if (resolver != null) {
      resolver.shutdownNow();
    }
    signalled.set(false);
    wakeUp();
    if (thread != null) {
      try {
        thread.join(2_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    // the context closes its sockets with its own linger, not theirs: what the thread sent last gets this long to leave
    context.setLinger(CLOSE_LINGER_MILLIS);
    if (zap != null) {
      // the link thread sends nothing more: a subscriber admitted now (were the handler's absence to admit one)
      // would hear nothing
      zapRunning = false;
      // its blocking receive wakes on a message: one, not answered, from a socket of this thread's own
      ZMQ.Socket stop = null;
      try {
        stop = context.createSocket(SocketType.REQ);
        stop.setLinger(0);
        stop.connect(ZAP_ENDPOINT);
        stop.send("stop", ZMQ.DONTWAIT);
        zap.join(1_000); // before the socket goes: its message is read
      } catch (org.zeromq.ZMQException e) {
        // the context is going anyway
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } finally {
        if (stop != null) {
          context.destroySocket(stop);
        }
      }
    }
    context.close();
    try {
      wake.sink().close();
      wake.source().close();
    } catch (IOException e) {
      // closing anyway
    }
  }
}
