package dev.kvrouter.index.events;

import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.WorkerView;
import dev.kvrouter.index.wire.EventDecoder;
import dev.kvrouter.index.wire.ZmqFrames;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * Follows the KV event streams of a set of {@link EventSource}s and applies them to a {@link KvIndex}.
 *
 * <p>One ZMQ SUB socket per source in connect mode (the engine binds, vLLM's default); in bind mode (engines
 * connect, llm-d style) sources that share an endpoint share one bound SUB and are told apart by topic. Each
 * source is pinned to one of {@link SubscriberConfig#shards()} event threads, which receives, decodes and
 * applies its batches in order (so each worker's view has a single writer) and runs its replays; ZMQ
 * reconnects with exponential backoff, and a bind or connect that fails is retried with backoff.
 *
 * <h2>Concurrency</h2>
 * {@link #add}, {@link #remove} and {@link #reconcile} may be called from any thread; they record the desired
 * sources and enqueue a command for the owning shard, which wakes to apply it between two passes over its
 * sockets. {@link #sync} waits until every command issued before it has been
 * applied. Removing a source purges the worker from the index on its own event thread.
 */
public final class EventSubscriber implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(EventSubscriber.class);
  /** A shard's rest after a pass that found nothing, doubled after each further empty pass up to the max. */
  private static final long REST_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
  /** Longest rest between two passes: the most a batch waits to be read. */
  private static final long MAX_REST_NANOS = TimeUnit.MILLISECONDS.toNanos(4);

  private final KvIndex index;
  private final EventPlaneHealth health;
  private final SubscriberConfig config;
  private final Clock clock;
  private final ThreadFactory threads;
  private final Map<WorkerId, EventSource> desired = new ConcurrentHashMap<>();
  private final AtomicLong unroutable = new AtomicLong();
  private final AtomicLong oversizeShared = new AtomicLong();
  private final AtomicLong polls = new AtomicLong();
  private final Shard[] shards;
  /**
   * Each worker's commands, run one at a time in the order issued, each on its shard (the head is the one queued
   * or running there). A source that moves to another shard (a new bound endpoint, connect to bind) must be closed
   * and purged by its old shard before the new one registers it: otherwise the new shard reuses the old view (two
   * writers) and the old shard's purge then removes it from the index while it is followed.
   */
  private final Map<WorkerId, ArrayDeque<Step>> lanes = new HashMap<>();
  private ZContext ctx;
  private volatile boolean running;

  public EventSubscriber(KvIndex index, EventPlaneHealth health, SubscriberConfig config, Clock clock,
      ThreadFactory threads) {
    this.index = Objects.requireNonNull(index, "index");
    this.health = Objects.requireNonNull(health, "health");
    this.config = Objects.requireNonNull(config, "config");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.threads = Objects.requireNonNull(threads, "threads");
    this.shards = new Shard[config.shards()];
  }

  /** Starts the event threads. */
  public synchronized void start() {
    if (running) {
      return;
    }
    ctx = new ZContext(1);
    running = true;
    for (int i = 0; i < shards.length; i++) {
      shards[i] = new Shard(i);
      Thread t = threads.newThread(shards[i]);
      shards[i].thread = t;
      t.start();
    }
  }

  /** Follows {@code source} (restarting it, and purging the worker, if it changed). */
  public void add(EventSource source) {
    Objects.requireNonNull(source, "source");
    synchronized (lanes) {
      EventSource old = desired.put(source.id(), source);
      if (source.equals(old)) {
        return;
      }
      if (old != null) {
        enqueue(old.id(), shardOf(old), s -> s.close(old.id(), true));
      }
      enqueue(source.id(), shardOf(source), s -> s.open(source));
    }
  }

  /** Stops following {@code id} and purges it from the index. */
  public void remove(WorkerId id) {
    synchronized (lanes) {
      EventSource old = desired.remove(id);
      if (old != null) {
        enqueue(id, shardOf(old), s -> s.close(id, true));
      }
    }
  }

  /** Makes the followed set equal to {@code sources}: adds new ones, removes gone ones, restarts changed ones. */
  public void reconcile(Collection<EventSource> sources) {
    Map<WorkerId, EventSource> want = new LinkedHashMap<>();
    for (EventSource s : sources) {
      if (want.put(s.id(), s) != null) {
        throw new IllegalArgumentException("two sources for " + s.id());
      }
    }
    for (WorkerId id : new ArrayList<>(desired.keySet())) {
      if (!want.containsKey(id)) {
        remove(id);
      }
    }
    want.values().forEach(this::add);
  }

  /** The sources currently followed (desired state; shards converge within a poll). */
  public Map<WorkerId, EventSource> sources() {
    return Map.copyOf(desired);
  }

  /** Messages received on a shared bound socket whose topic matched no source. */
  public long unroutableMessages() {
    return unroutable.get();
  }

  /**
   * Messages over {@link SubscriberConfig#maxMessageBytes()} on a shared bound socket (one followed source's are
   * its {@link EventCounter#OVERSIZE}).
   */
  public long oversizeSharedMessages() {
    return oversizeShared.get();
  }

  /** Passes the event threads made over their sockets, each reading every socket without waiting. */
  public long polls() {
    return polls.get();
  }

  /** Waits until every command issued before this call has been applied by its shard. */
  public void sync(Duration timeout) {
    CountDownLatch latch;
    synchronized (lanes) {
      // a worker's later commands wait in its lane, on no shard yet
      List<WorkerId> waiting = new ArrayList<>(lanes.keySet());
      latch = new CountDownLatch(shards.length + waiting.size());
      for (Shard s : shards) {
        s.submit(x -> latch.countDown());
      }
      for (WorkerId id : waiting) {
        enqueue(id, lanes.get(id).getLast().shard(), x -> latch.countDown());
      }
    }
    try {
      if (!latch.await(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
        throw new IllegalStateException("event shards did not catch up within " + timeout);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }

  /** Stops the event threads and closes every socket; the index keeps what it has. */
  @Override
  public synchronized void close() {
    if (!running) {
      return;
    }
    running = false;
    for (Shard s : shards) {
      LockSupport.unpark(s.thread);
    }
    for (Shard s : shards) {
      try {
        s.thread.join(5000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    ctx.close();
  }

  /** Runs {@code task} on the event thread of {@code source}'s shard after what is queued there (for tests). */
  void runOnShardOf(EventSource source, Runnable task) {
    shardOf(source).submit(s -> task.run());
  }

  /** Appends a command to {@code id}'s lane; call holding {@link #lanes}. */
  private void enqueue(WorkerId id, Shard shard, Command command) {
    Step step = new Step(shard, command);
    ArrayDeque<Step> lane = lanes.computeIfAbsent(id, k -> new ArrayDeque<>());
    lane.add(step);
    if (lane.size() == 1) {
      dispatch(id, step);
    }
  }

  private void dispatch(WorkerId id, Step step) {
    step.shard().submit(s -> {
      try {
        step.command().run(s);
      } finally {
        stepDone(id);
      }
    });
  }

  private void stepDone(WorkerId id) {
    synchronized (lanes) {
      ArrayDeque<Step> lane = lanes.get(id);
      lane.poll();
      Step next = lane.peek();
      if (next == null) {
        lanes.remove(id);
      } else {
        dispatch(id, next);
      }
    }
  }

  private Shard shardOf(EventSource s) {
    if (!running) {
      throw new IllegalStateException("subscriber is not started");
    }
    // sources sharing a bound endpoint must share a shard (they share a socket)
    int h = s.bind() ? s.endpoint().hashCode() : s.id().hashCode();
    return shards[Math.floorMod(h, shards.length)];
  }

  /** One followed source on its shard. */
  private static final class Follow {
    final EventSource source;
    final WorkerEventHealth health;
    final StreamFollower follower;
    /** Null when the source has no replay endpoint. */
    final ReplayClient replay;
    Endpoint endpoint;

    void closeReplay() {
      if (replay != null) {
        replay.close();
      }
    }

    Follow(EventSource source, WorkerEventHealth health, StreamFollower follower, ReplayClient replay) {
      this.source = source;
      this.health = health;
      this.follower = follower;
      this.replay = replay;
    }
  }

  /** One SUB socket and the sources it feeds. */
  private static final class Endpoint {
    final String key;
    final String address;
    final boolean bind;
    final List<Follow> members = new ArrayList<>(1);
    ZMQ.Socket socket;
    /** Bound or connected. */
    boolean attached;
    boolean attachFailed;
    long nextAttachMillis;
    long attachBackoffMillis;
    /** Messages over the size limit, counted by ZMQ's I/O thread ({@link #watchSize}), not yet reported. */
    final AtomicLong oversize = new AtomicLong();

    Endpoint(String key, String address, boolean bind) {
      this.key = key;
      this.address = address;
      this.bind = bind;
    }
  }

  private interface Command {
    void run(Shard shard);
  }

  private record Step(Shard shard, Command command) {}

  /** An event thread: owns its sockets, followers and the views of its workers. */
  private final class Shard implements Runnable {
    final int number;
    final ConcurrentLinkedQueue<Command> commands = new ConcurrentLinkedQueue<>();
    final Map<WorkerId, Follow> follows = new HashMap<>();
    final Map<String, Endpoint> endpoints = new LinkedHashMap<>();
    final EventDecoder decoder = new EventDecoder();
    /** The endpoints' sockets in a list, for the passes. */
    final List<Endpoint> sockets = new ArrayList<>();
    volatile Thread thread;
    long nextTick;
    long restNanos = REST_NANOS;

    Shard(int number) {
      this.number = number;
    }

    void submit(Command c) {
      commands.add(c);
      Thread t = thread;
      if (t != null) {
        LockSupport.unpark(t);
      }
    }

    @Override
    public void run() {
      try {
        while (running) {
          Command c;
          while ((c = commands.poll()) != null) {
            try {
              c.run(this);
            } catch (RuntimeException e) {
              log.error("event shard {} command failed", number, e);
            }
          }
          long now = clock.millis();
          retryAttach(now);
          if (sockets.isEmpty()) {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(config.pollMillis()));
          } else if (readPass()) {
            restNanos = REST_NANOS;
          } else {
            LockSupport.parkNanos(restNanos);
            restNanos = Math.min(MAX_REST_NANOS, restNanos * 2);
          }
          if (now >= nextTick) {
            nextTick = now + config.tickMillis();
            for (Follow f : follows.values()) {
              f.health.tick(now);
            }
            for (Endpoint ep : endpoints.values()) {
              reportOversize(ep);
            }
          }
        }
      } catch (RuntimeException e) {
        log.error("event shard {} died", number, e);
      } finally {
        for (Follow f : follows.values()) {
          f.closeReplay();
        }
        for (Endpoint ep : endpoints.values()) {
          if (ep.socket != null) {
            ctx.destroySocket(ep.socket);
          }
        }
      }
    }

    void open(EventSource source) {
      if (follows.containsKey(source.id())) {
        close(source.id(), true);
      }
      WorkerView view = index.register(source.id());
      view.setEventStream(true);
      if (source.notPrefixClosed()) {
        view.markNotPrefixClosed("configured (events.walk_models)");
      }
      WorkerEventHealth h = health.register(view);
      EventApplier applier = new EventApplier(view, source.model(), source.blockSize(), h);
      ReplayClient replay = source.replayEndpoint() == null ? null
          : new ReplayClient(ctx, source.replayEndpoint(), config.replayTimeoutMillis(), config.maxReplayBatches(),
              config.reconnectMillis(), config.handshakeMillis(), config.maxMessageBytes(),
              n -> h.add(EventCounter.OVERSIZE, n), () -> running);
      StreamFollower follower = new StreamFollower(applier, h, decoder, replay, clock, source.id().dpRank());
      Follow f = new Follow(source, h, follower, replay);
      follows.put(source.id(), f);
      String key = source.bind() ? "bind|" + source.endpoint() : "connect|" + source.endpoint() + "|" + source.id();
      Endpoint ep = endpoints.computeIfAbsent(key, k -> new Endpoint(k, source.endpoint(), source.bind()));
      ep.members.add(f);
      f.endpoint = ep;
      if (ep.socket == null) {
        ep.socket = ZmqSockets.sub(ctx, config, source.endpoint());
        watchSize(ep);
        ep.attachBackoffMillis = config.reconnectMillis();
        tryAttach(ep, clock.millis());
        sockets.add(ep);
      }
      ep.socket.subscribe(source.topic().getBytes(StandardCharsets.UTF_8));
      log.info("following KV events of {} at {} ({}{})", source.id(), source.endpoint(),
          source.bind() ? "bind" : "connect", source.replayEndpoint() == null ? ", no replay" : ", replay");
    }

    void close(WorkerId id, boolean purge) {
      Follow f = follows.remove(id);
      if (f != null) {
        f.closeReplay();
        Endpoint ep = f.endpoint;
        ep.members.remove(f);
        if (ep.members.isEmpty()) {
          ctx.destroySocket(ep.socket);
          endpoints.remove(ep.key);
          sockets.remove(ep);
        } else {
          ep.socket.unsubscribe(f.source.topic().getBytes(StandardCharsets.UTF_8));
        }
        health.unregister(id);
      }
      if (purge) {
        // on this thread, which was the worker's only writer
        index.remove(id);
      }
    }

    private void tryAttach(Endpoint ep, long now) {
      String error = "";
      try {
        if (ep.bind) {
          ep.attached = ep.socket.bind(ep.address);
        } else {
          ep.socket.connect(ep.address); // ZMQ retries a connected endpoint itself; this throws only before that
          ep.attached = true;
        }
      } catch (RuntimeException e) {
        ep.attached = false;
        error = ": " + e;
      }
      if (ep.attached) {
        if (ep.attachFailed && !ep.bind) {
          // nothing arrived while unconnected, so the view claims nothing false
          for (Follow f : ep.members) {
            f.health.markFresh("connected to " + ep.address);
          }
        }
        return;
      }
      ep.attachFailed = true;
      log.warn("cannot {} {} for KV events{}; retrying in {} ms", ep.bind ? "bind" : "connect", ep.address, error,
          ep.attachBackoffMillis);
      if (!ep.bind) {
        // so the router sees a worker it cannot follow
        for (Follow f : ep.members) {
          f.health.markStale("cannot connect to " + ep.address + error, now);
        }
      }
      ep.nextAttachMillis = now + ep.attachBackoffMillis;
      ep.attachBackoffMillis = Math.min(config.reconnectMaxMillis(), ep.attachBackoffMillis * 2);
    }

    private void retryAttach(long now) {
      for (Endpoint ep : endpoints.values()) {
        if (!ep.attached && now >= ep.nextAttachMillis) {
          tryAttach(ep, now);
        }
      }
    }

    /*
     * Why passes instead of JeroMQ's poll. JeroMQ 0.6.0's socket mailbox writes a byte to its signal pipe for every
     * command (each message arriving on an idle pipe is one) but reads one back only when a read finds no command
     * queued, so the pipe stays readable long after the commands are handled. ZMQ.poll then never sleeps: select
     * returns at once, every socket is asked for its state (re-registered, a map, iterators, a socket option each)
     * and finds nothing, and it loops until a message comes or the poll times out. That busy wait was most of the
     * event thread's CPU. A pass reads every socket without waiting (a read with nothing queued compares two
     * counters, or reads back one stale signal byte); a pass that found nothing rests, a park that commands and
     * close end at once. The rest doubles from REST_NANOS over empty passes up to MAX_REST_NANOS, so 64 idle
     * sockets are read 250 times a second, not 1,000, and a batch waits at most 4 ms to be read; engines publish
     * one every 10-40 ms, and load is scraped every 250.
     */

    /** Reads each socket up to its receive budget; true if any message was read (so another pass may find more). */
    private boolean readPass() {
      polls.incrementAndGet();
      boolean read = false;
      for (int i = 0; i < sockets.size(); i++) {
        read |= receive(sockets.get(i));
      }
      return read;
    }

    /**
     * ZMQ drops a connection whose message is over the size limit without a word to the socket's reader: its I/O
     * thread reports the disconnect, with the reason still in that thread's errno, to this hook, which runs there.
     */
    private void watchSize(Endpoint ep) {
      ep.socket.setEventHook(event -> {
        if (ZmqSockets.oversize()) {
          ep.oversize.incrementAndGet();
        }
      }, ZMQ.EVENT_DISCONNECTED);
    }

    /** Counts and logs what {@link #watchSize} saw; a shared bound socket cannot tell which engine sent it. */
    private void reportOversize(Endpoint ep) {
      long n = ep.oversize.getAndSet(0);
      if (n == 0) {
        return;
      }
      if (ep.members.size() == 1) {
        ep.members.get(0).health.add(EventCounter.OVERSIZE, n);
      } else {
        oversizeShared.addAndGet(n);
      }
      log.warn("dropped {} KV event message(s) at {} larger than events.max_message_bytes ({}): the connection is"
          + " made again and the batches lost are recovered as after a gap", n, ep.address, config.maxMessageBytes());
      if (!ep.bind) {
        // ZMQ ends a session on a protocol error instead of reconnecting it (an engine that connects to a bound
        // socket reconnects on its side); what the message carried is lost, as after a gap
        for (Follow f : ep.members) {
          f.health.inc(EventCounter.DROPPED_BATCHES);
          f.health.markStale("a KV event message over events.max_message_bytes was dropped", clock.millis());
        }
        ep.socket.disconnect(ep.address);
        ep.socket.connect(ep.address);
      }
    }

    /** Reads up to the receive budget from {@code ep}; true if it read a message. */
    private boolean receive(Endpoint ep) {
      reportOversize(ep);
      byte[][] frames = new byte[4][];
      for (int n = 0; n < config.receiveBudget(); n++) {
        byte[] topic = ep.socket.recv(ZMQ.DONTWAIT);
        if (topic == null) {
          return n > 0;
        }
        int count = 1;
        frames[0] = topic;
        while (ep.socket.hasReceiveMore()) {
          byte[] f = ep.socket.recv(0);
          if (count < frames.length) {
            frames[count] = f;
          }
          count++;
        }
        Follow f = route(ep, topic);
        if (f == null) {
          unroutable.incrementAndGet();
          continue;
        }
        f.health.inc(EventCounter.RECEIVED);
        if (count != 3 || frames[1].length != 8) {
          f.health.inc(EventCounter.MALFORMED);
          continue;
        }
        try {
          f.follower.onLive(ZmqFrames.readSeq(frames[1]), frames[2]);
        } catch (RuntimeException e) {
          // this worker's failure alone: thrown on, it would end the shard and every other worker's stream with it
          f.health.inc(EventCounter.ERRORS);
          if (!f.health.stale()) {
            log.error("handling a KV event batch of {} failed; its view is stale", f.source.id(), e);
          }
          f.health.markStale("handling a batch failed: " + e.getClass().getSimpleName(), clock.millis());
        }
      }
      return true;
    }

    private Follow route(Endpoint ep, byte[] topic) {
      List<Follow> ms = ep.members;
      if (ms.size() == 1 && !ep.bind) {
        // one engine on this socket; a bound one takes any engine whose topic merely starts with a subscription
        return ms.get(0);
      }
      for (Follow f : ms) {
        byte[] t = f.source.topic().getBytes(StandardCharsets.UTF_8);
        if (Arrays.equals(t, topic)) {
          return f;
        }
      }
      return null;
    }
  }
}
