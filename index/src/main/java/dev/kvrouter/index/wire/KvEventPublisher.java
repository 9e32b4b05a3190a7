package dev.kvrouter.index.wire;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * A vLLM-compatible KV event publisher: a ZMQ PUB sending {@code [topic, seq8, payload]} with {@code seq}
 * from 0, and an optional ROUTER replay socket with a bounded buffer, as {@code ZmqEventPublisher} does.
 *
 * <p>Used by tests and by the simulated workers. Fault hooks ({@link #dropNext}, {@link #holdAndReverse},
 * {@link #setDelay}, {@link #stopPublishing}, {@link #restart}, {@link #setReplayEnabled}) let a test or a
 * simulation reproduce what real deployments suffer: HWM drops, reordering, a stalled stream, an engine
 * restart and a dead replay socket.
 *
 * <p>Concurrency: one internal thread owns both sockets, the sequence counter and the replay buffer. Every
 * public method only enqueues onto one FIFO queue that this thread drains, so batches and fault commands
 * apply in call order. {@link #publish} blocks while the queue is full, like vLLM's {@code Queue.put}.
 */
public final class KvEventPublisher implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(KvEventPublisher.class);
  private static final long IDLE_POLL_MILLIS = 2;
  private static final long REBIND_TIMEOUT_MILLIS = 5_000;
  /** JeroMQ occasionally stalls a ZMTP handshake forever (zeromq/jeromq#849); a short interval retries it. */
  private static final int HANDSHAKE_MILLIS = 1_000;

  private final PublisherConfig config;
  private final BlockingQueue<Object> queue;
  private final Thread thread;
  private final EventEncoder encoder;
  private final byte[] topic;
  private final AtomicLong lastSeq = new AtomicLong(-1);
  private final AtomicLong lastSentSeq = new AtomicLong(-1);
  private final AtomicLong sentBatches = new AtomicLong();
  private final AtomicLong droppedBatches = new AtomicLong();
  private final AtomicLong replayRequests = new AtomicLong();
  private final CompletableFuture<Void> started = new CompletableFuture<>();
  private volatile boolean running = true;
  private volatile String boundEndpoint;
  private volatile String boundReplayEndpoint;

  // Owned by the publisher thread.
  private ZContext ctx;
  private ZMQ.Socket pub;
  private ZMQ.Socket router;
  private long nextSeq;
  private final ArrayDeque<Buffered> replayBuffer = new ArrayDeque<>();
  private final ArrayDeque<Delayed> delayed = new ArrayDeque<>();
  private final List<Buffered> held = new ArrayList<>();
  private int dropRemaining;
  private int holdRemaining;
  private long delayNanos;
  private boolean stopped;
  private boolean replayEnabled = true;
  private final List<CompletableFuture<Void>> flushWaiters = new ArrayList<>();

  private record Buffered(long seq, byte[] payload) {}

  private record Delayed(long dueNanos, long seq, byte[] payload) {}

  private record Batch(List<KvEvent> events, Double ts, Integer dpRank) {}

  private record Command(Runnable action, CompletableFuture<Void> done) {}

  private KvEventPublisher(PublisherConfig config, ThreadFactory threads) {
    this.config = config;
    this.queue = new LinkedBlockingQueue<>(config.maxQueueSize());
    this.encoder = new EventEncoder(config.layout(), config.hashEncoding());
    this.topic = config.topic().getBytes(StandardCharsets.UTF_8);
    this.thread = threads.newThread(this::run);
  }

  /** Starts a publisher and waits until its sockets are bound or connected. */
  public static KvEventPublisher start(PublisherConfig config) {
    return start(config, r -> {
      Thread t = new Thread(r, "kv-publisher");
      t.setDaemon(true);
      return t;
    });
  }

  /** As {@link #start(PublisherConfig)}, with the thread made by {@code threads}. */
  public static KvEventPublisher start(PublisherConfig config, ThreadFactory threads) {
    KvEventPublisher p = new KvEventPublisher(Objects.requireNonNull(config, "config"), threads);
    p.thread.start();
    try {
      p.started.get(REBIND_TIMEOUT_MILLIS * 2, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      p.close();
      throw new IllegalStateException("interrupted while starting the publisher", e);
    } catch (ExecutionException | TimeoutException e) {
      p.close();
      throw new IllegalStateException("publisher failed to start on " + config.endpoint(), e);
    }
    return p;
  }

  public PublisherConfig config() {
    return config;
  }

  /** The PUB endpoint actually bound (ephemeral ports resolved), or the configured one when connecting. */
  public String endpoint() {
    return boundEndpoint;
  }

  /** The ROUTER endpoint actually bound, or {@code null} without replay. */
  public String replayEndpoint() {
    return boundReplayEndpoint;
  }

  /** Publishes one batch stamped with the clock's time; blocks while the queue is full. */
  public void publish(List<KvEvent> events) {
    enqueue(new Batch(List.copyOf(events), null, null));
  }

  /** Publishes one batch with an explicit engine timestamp (seconds) and DP rank (null: the configured one). */
  public void publish(List<KvEvent> events, double ts, Integer dpRank) {
    enqueue(new Batch(List.copyOf(events), ts, dpRank));
  }

  /** The sequence number of the last batch numbered in this lifetime, -1 before the first. */
  public long lastSeq() {
    return lastSeq.get();
  }

  /** The highest sequence number actually sent on the PUB socket in this lifetime, -1 before the first. */
  public long lastSentSeq() {
    return lastSentSeq.get();
  }

  /** Batches actually sent on the PUB socket (all lifetimes). */
  public long sentBatches() {
    return sentBatches.get();
  }

  /** Batches numbered but not sent because of {@link #dropNext} or {@link #stopPublishing}. */
  public long droppedBatches() {
    return droppedBatches.get();
  }

  /** Replay requests answered (all lifetimes). */
  public long replayRequests() {
    return replayRequests.get();
  }

  /** Fault: the next {@code n} batches get sequence numbers and enter the replay buffer but are not sent. */
  public void dropNext(int n) {
    command(() -> dropRemaining += n);
  }

  /** Fault: hold the next {@code n} batches, then send them in reverse order (a reorder on the wire). */
  public void holdAndReverse(int n) {
    command(() -> holdRemaining += n);
  }

  /** Fault: delay every later send by {@code delay} (order kept); zero turns it off. */
  public void setDelay(Duration delay) {
    command(() -> delayNanos = delay.toNanos());
  }

  /** Fault: stop sending; batches are still numbered and buffered for replay (a stalled or partitioned stream). */
  public void stopPublishing() {
    command(() -> stopped = true);
  }

  /** Undoes {@link #stopPublishing}; batches numbered meanwhile stay unsent (replay can recover them). */
  public void resumePublishing() {
    command(() -> stopped = false);
  }

  /** Fault: ignore replay requests (a dead or misconfigured replay socket). */
  public void setReplayEnabled(boolean enabled) {
    command(() -> replayEnabled = enabled);
  }

  /**
   * Fault: an engine restart. Unsent batches are lost, sockets close and re-open on the same endpoints,
   * the sequence restarts at 0 and the replay buffer starts empty.
   */
  public void restart() {
    awaitCommand(this::doRestart, "restart");
  }

  /**
   * Waits until every batch published so far has been numbered and every delayed batch has been sent
   * (batches still held by {@link #holdAndReverse} stay held).
   */
  public void flush(Duration timeout) {
    CompletableFuture<Void> f = new CompletableFuture<>();
    command(() -> flushWaiters.add(f));
    try {
      f.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    } catch (ExecutionException | TimeoutException e) {
      throw new IllegalStateException("publisher did not flush within " + timeout, e);
    }
  }

  @Override
  public void close() {
    // No interrupt: the thread sees the flag within one idle poll (2 ms). An interrupt landing while it is
    // inside a JeroMQ call (ctx.close() on the way out, say) closes the NIO pipe of a socket's mailbox, and
    // ZMQ's I/O thread then fails to deliver the socket's termination ack (ClosedChannelException on stderr
    // at shutdown, seen in the demo).
    running = false;
    try {
      thread.join(REBIND_TIMEOUT_MILLIS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void enqueue(Object item) {
    if (!running) {
      throw new IllegalStateException("publisher is closed");
    }
    try {
      queue.put(item);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while publishing", e);
    }
  }

  private CompletableFuture<Void> command(Runnable action) {
    CompletableFuture<Void> done = new CompletableFuture<>();
    enqueue(new Command(action, done));
    return done;
  }

  private void awaitCommand(Runnable action, String what) {
    try {
      command(action).get(REBIND_TIMEOUT_MILLIS * 2, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted during " + what, e);
    } catch (ExecutionException | TimeoutException e) {
      throw new IllegalStateException(what + " failed", e);
    }
  }

  // ---- publisher thread ----

  private void run() {
    try {
      ctx = new ZContext(1);
      openSockets(config.endpoint(), config.replayEndpoint());
      started.complete(null);
      while (running) {
        Object item = queue.poll(IDLE_POLL_MILLIS, TimeUnit.MILLISECONDS);
        while (item != null) {
          handle(item);
          item = queue.poll();
        }
        releaseDelayed();
        serviceReplay();
        completeFlushes();
      }
    } catch (InterruptedException e) {
      // only if the owner of the thread interrupts it; fall through to cleanup
    } catch (RuntimeException e) {
      started.completeExceptionally(e);
      log.error("KV event publisher on {} failed", config.endpoint(), e);
    } finally {
      running = false;
      if (ctx != null) {
        ctx.close();
      }
    }
  }

  private void handle(Object item) {
    if (item instanceof Command c) {
      try {
        c.action().run();
        c.done().complete(null);
      } catch (RuntimeException e) {
        c.done().completeExceptionally(e);
      }
      return;
    }
    Batch b = (Batch) item;
    double ts = b.ts() != null ? b.ts() : epochSeconds(config.clock().instant());
    Integer dp = b.dpRank() != null ? b.dpRank() : config.dataParallelRank();
    byte[] payload = encoder.encode(new EventBatch(ts, b.events(), dp, 0));
    long seq = nextSeq++;
    lastSeq.set(seq);
    replayBuffer.addLast(new Buffered(seq, payload));
    while (replayBuffer.size() > config.bufferSteps()) {
      replayBuffer.removeFirst();
    }
    if (dropRemaining > 0) {
      dropRemaining--;
      droppedBatches.incrementAndGet();
      return;
    }
    if (stopped) {
      droppedBatches.incrementAndGet();
      return;
    }
    if (holdRemaining > 0) {
      held.add(new Buffered(seq, payload));
      if (--holdRemaining == 0) {
        for (int i = held.size() - 1; i >= 0; i--) {
          sendOrDelay(held.get(i).seq(), held.get(i).payload());
        }
        held.clear();
      }
      return;
    }
    sendOrDelay(seq, payload);
  }

  private void sendOrDelay(long seq, byte[] payload) {
    if (delayNanos > 0 || !delayed.isEmpty()) {
      delayed.addLast(new Delayed(System.nanoTime() + delayNanos, seq, payload));
    } else {
      send(seq, payload);
    }
  }

  private void releaseDelayed() {
    long now = System.nanoTime();
    while (!delayed.isEmpty() && delayed.peekFirst().dueNanos() - now <= 0) {
      Delayed d = delayed.removeFirst();
      send(d.seq(), d.payload());
    }
  }

  private void completeFlushes() {
    if (!flushWaiters.isEmpty() && delayed.isEmpty()) {
      flushWaiters.forEach(f -> f.complete(null));
      flushWaiters.clear();
    }
  }

  private void send(long seq, byte[] payload) {
    pub.sendMore(topic);
    pub.sendMore(ZmqFrames.seqBytes(seq));
    pub.send(payload);
    sentBatches.incrementAndGet();
    if (seq > lastSentSeq.get()) {
      lastSentSeq.set(seq);
    }
  }

  private void serviceReplay() {
    if (router == null) {
      return;
    }
    while (true) {
      byte[] identity = router.recv(ZMQ.DONTWAIT);
      if (identity == null) {
        return;
      }
      List<byte[]> frames = new ArrayList<>(3);
      frames.add(identity);
      while (router.hasReceiveMore()) {
        frames.add(router.recv(0));
      }
      if (!replayEnabled) {
        continue;
      }
      if (frames.size() != 3 || frames.get(2).length != 8) {
        log.warn("ignoring replay request with {} frames", frames.size());
        continue;
      }
      long start = ZmqFrames.readSeq(frames.get(2));
      replayRequests.incrementAndGet();
      boolean withTopic = config.replayLayout() == ReplayLayout.WITH_TOPIC;
      for (Buffered b : replayBuffer) {
        if (Long.compareUnsigned(b.seq(), start) >= 0) {
          router.sendMore(identity);
          router.sendMore(new byte[0]);
          if (withTopic) {
            router.sendMore(topic);
          }
          router.sendMore(ZmqFrames.seqBytes(b.seq()));
          router.send(b.payload());
        }
      }
      router.sendMore(identity);
      router.sendMore(new byte[0]);
      if (withTopic) {
        router.sendMore(new byte[0]);
      }
      router.sendMore(ZmqFrames.seqBytes(ZmqFrames.END_SEQ));
      router.send(new byte[0]);
    }
  }

  private void doRestart() {
    closeSockets();
    replayBuffer.clear();
    delayed.clear();
    held.clear();
    dropRemaining = 0;
    holdRemaining = 0;
    stopped = false;
    nextSeq = 0;
    lastSeq.set(-1);
    lastSentSeq.set(-1);
    openSockets(boundEndpoint, boundReplayEndpoint);
  }

  private void openSockets(String endpoint, String replay) {
    pub = ctx.createSocket(SocketType.PUB);
    pub.setLinger(0);
    pub.setSndHWM(config.hwm());
    pub.setHandshakeIvl(HANDSHAKE_MILLIS);
    if (config.bind()) {
      boundEndpoint = bindWithRetry(pub, endpoint);
    } else {
      if (!pub.connect(endpoint)) {
        throw new IllegalStateException("cannot connect PUB to " + endpoint);
      }
      boundEndpoint = endpoint;
    }
    if (replay != null) {
      router = ctx.createSocket(SocketType.ROUTER);
      router.setLinger(0);
      router.setHandshakeIvl(HANDSHAKE_MILLIS);
      boundReplayEndpoint = bindWithRetry(router, replay);
    }
  }

  private void closeSockets() {
    if (pub != null) {
      ctx.destroySocket(pub);
      pub = null;
    }
    if (router != null) {
      ctx.destroySocket(router);
      router = null;
    }
  }

  /** Binds, retrying while a just-closed socket still holds the port (ZMQ closes asynchronously). */
  private static String bindWithRetry(ZMQ.Socket socket, String endpoint) {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(REBIND_TIMEOUT_MILLIS);
    RuntimeException last = null;
    while (System.nanoTime() < deadline) {
      try {
        if (socket.bind(endpoint)) {
          return socket.getLastEndpoint();
        }
      } catch (RuntimeException e) {
        last = e;
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    throw new IllegalStateException("cannot bind " + endpoint, last);
  }

  private static double epochSeconds(Instant t) {
    return t.getEpochSecond() + t.getNano() / 1e9;
  }
}
