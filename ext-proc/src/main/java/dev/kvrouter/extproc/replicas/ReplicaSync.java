package dev.kvrouter.extproc.replicas;

import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.Reservation;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.media.MediaIdentities;
import dev.kvrouter.xds.registry.WorkerSet;
import dev.kvrouter.xds.server.EnvoyClusters.Holding;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What one router replica tells the others so that each routes as if it were the only router: its reservations
 * as they move (reserved at the decision, prefill done at the first byte, released at the end) and its
 * predictions (the prefixes it just sent somewhere). Without it a replica sees the others' requests only through
 * the workers' scraped queues, one interval late and without their prefill sizes, and not their predictions at
 * all: in virtual time two replicas cost 31% of TTFT p50 on the no-sharing control and best-of-N siblings lost a
 * sixth of their cache (docs/benchmarks/ab.md, "Router replicas").
 *
 * <p>Outbound: {@link #ledgerListener()} and {@link #sharing} turn this replica's moves into messages for
 * {@code outbox} (the transport; it must not block: the decision path calls it). Inbound: {@link #apply} copies
 * another replica's messages into this replica's ledger ({@link LoadLedger#reserveRemote}) and index; a replica
 * not heard from for {@code peerTimeoutNanos} (its messages and heartbeats stopped: it crashed, or the link is
 * down) has every copied reservation released by {@link #expireSilent}. Messages are fire-and-forget, but numbered:
 * each ends with its sender's sequence number (from 1, per process: a restart is a new identity), given under one
 * lock as the message is handed to the outbox, so the numbers follow the transport's order and a message it drops
 * (its queue full) is a gap as much as one lost on the wire. A receiver that sees a gap asks that sender for its
 * whole state ({@code RESYNC}); the sender answers with the resend a joining replica gets (below), ended by a
 * heartbeat naming the number it began at. A receiver that heard every message of the sender since then releases
 * each copy no message since has sent: its release was lost. Before, one lost release was a load error until the
 * ledger's expiry (300 s).
 *
 * <p>A replica that joins late (scaled up, restarted: a new identity) learns what is already in flight: whoever
 * hears a replica for the first time sends it every worker's last turn and every reservation of its own still
 * held, in its current state, and asks it for its own ({@code SYNC_REQUEST}), since the first to hear may not yet
 * be heard (ZMQ connects each way on its own): whichever direction comes up last carries the exchange. Copies are
 * keyed by the sender's id, so a reservation sent again is applied once.
 *
 * <p>Threading: outbound from any request thread; {@link #apply}, {@link #heartbeat} and {@link #expireSilent}
 * from one thread, the transport's, which calls {@link #expireSilent} about once a second: it also forgets copies
 * the ledger expired on its own (their release was lost), so the copies stay bounded by what is in flight.
 *
 * <p>Wire: one msgpack array per message, {@code [kind, replica, ...]}: reserve {@code [1, r, id, worker,
 * dpRank, prefillTokens, uniqueBlocks, hashes, turn, promptTokens, blockSize]}, prefill done {@code [2, r, id]},
 * released {@code [3, r, id]}, predicted {@code [4, r, worker, dpRank, hashes]}, heartbeat {@code [5, r]}, sync
 * request {@code [6, r]}, turns {@code [7, r, [worker, dpRank, turn, ...]]} (every worker's last turn, sent with
 * the reservations still held to a replica heard for the first time, in messages of up to {@link
 * #TURNS_PER_MESSAGE} workers), Envoys {@code [8, r, envoys, [worker, ...]]} (what the Envoys on this replica's xDS
 * server hold, {@link EnvoyGate}: how many it knows, 0 for none, and the workers every one of them holds; sent by a
 * replica that serves xDS when that changes, with every heartbeat and to a replica heard for the first time, the
 * names within {@link #MAX_ENVOY_VIEW_BYTES}); hashes as one binary of 8-byte big-endian values, at most {@link
 * #MAX_HASHES} (so that no message exceeds {@link #MAX_MESSAGE_BYTES}). A replica of before the Envoys message
 * counts it as a kind it does not know, changes nothing and keeps routing as before. Since the sequence numbers
 * every message has one more field, last, the sender's sequence number {@code seq}; a heartbeat is {@code [5, r,
 * stateFrom, seq]} (stateFrom 0, or the first number of the whole state it ends), and a question is {@code [9, r,
 * target, after, seq]} (target: the replica asked; after: the last of its numbers heard). A message with fewer fields
 * than its kind's numbered layout is a replica of before's and has no number: applied as ever, no gap seen. Fields a
 * later version adds go before the number. A replica of before reads each kind's fields in their places and no
 * further, and counts a question as a kind it does not know. A reservation carries its decision's
 * prediction (the receiver records both from the one message, the prediction first); a separate prediction is
 * sent only for a decision the ledger did not account. The turn ({@link Reservation#turn()}) and the prompt's
 * size came later: a reservation without them (eight fields, from a replica of before) takes the receiver's next
 * turn, is charged as sent, and its prediction is expected in its own message, as such a replica sends it; a
 * replica of before reads the first eight fields of a new one and misses the prediction it carries.
 *
 * <p>A process in {@code xds} mode serves Envoy's xDS and routes nothing: it joins the link as a member that only
 * shares what its Envoys hold ({@link #viewOnly}), so that routers in {@code ext-proc} mode, whose own process hears
 * no Envoy, gate new workers on it. It sends heartbeats with its view, its view to a member heard for the first time
 * and on a sync request, and nothing else; it has no ledger and no index, so what the others send about their load
 * (and their own Envoys' views, which only a router applies) is read, checked as ever, and dropped: it keeps no more
 * per member than when it last heard it.
 */
public final class ReplicaSync {

  private static final Logger log = LoggerFactory.getLogger(ReplicaSync.class);

  static final int RESERVE = 1;
  static final int PREFILL_DONE = 2;
  static final int RELEASED = 3;
  static final int PREDICTED = 4;
  static final int HEARTBEAT = 5;
  static final int SYNC_REQUEST = 6;
  static final int TURNS = 7;
  static final int ENVOYS = 8;
  static final int RESYNC = 9;

  /**
   * Each kind's fields in a message that carries a sequence number (its last field): a message with fewer is from a
   * replica of before the sequence numbers, and has none. Indexed by kind; what every sender writes
   * ({@link #start}) and every receiver reads.
   */
  private static final int[] SEQUENCED_FIELDS = {0, 12, 4, 4, 6, 4, 3, 4, 5, 5};
  /** msgpack's uint 64 with a zero value: the sequence number's place, filled in as the message is handed over. */
  private static final byte[] SEQ_PLACE = {(byte) 0xcf, 0, 0, 0, 0, 0, 0, 0, 0};
  /** How long a replica waits for the state it asked a peer for before asking again. */
  static final long RESYNC_RETRY_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(2);

  /**
   * The largest message a replica sends, and so the most the link reads of one ({@link ZmqReplicaLink}): bounded
   * by the largest reservation, {@link #MAX_HASHES} hashes of 8 bytes (8 MiB), and the largest turns message,
   * {@link #TURNS_PER_MESSAGE} workers of at most 16 bytes besides their names (under 1 MiB with names of 200
   * bytes), or the Envoys message, {@link #MAX_ENVOY_VIEW_BYTES} of names. The rest is room for worker names no fleet has, far below what would hurt the heap.
   */
  public static final int MAX_MESSAGE_BYTES = 64 << 20;
  /**
   * Hashes a message carries at most: 2^20 blocks, a prompt of 16M tokens at vLLM's default block of 16 and of
   * 1M at blocks of one token, beyond any context window; a longer prompt's first 2^20 are sent.
   */
  static final int MAX_HASHES = 1 << 20;
  /** Workers' turns per message: a fleet of any size is sent in messages of bounded size. */
  static final int TURNS_PER_MESSAGE = 4096;
  /**
   * The worker names an Envoys message lists at most, in bytes: over 150,000 workers of 100-character names (the
   * longest workers.yaml takes). Past it the message lists the first names in sorted order, and the other replicas
   * hold the rest back as if those Envoys lacked them (routed to there only when nothing else is eligible).
   */
  static final int MAX_ENVOY_VIEW_BYTES = 16 << 20;
  /**
   * Members heard at once at most, far beyond any replica set: each is kept for the peer timeout and sent every
   * reservation held here, so ids without end (a member's bug) would grow both without bound.
   */
  static final int MAX_PEERS = 1024;

  private final long replica;
  /** Null for a member that only shares its Envoys' view ({@link #viewOnly}). */
  private final LoadLedger ledger;
  private final PrefixOverlapSource overlaps;
  private final Consumer<byte[]> outbox;
  private final LongSupplier nanoClock;
  private final long peerTimeoutNanos;
  private final EnvoyGate envoys;
  /** Keeps the Envoys messages in the order their views were read: the xDS callbacks and the link thread send them. */
  private final Object envoysSending = new Object();
  private boolean envoysCapped;
  private final Map<Long, Peer> peers = new HashMap<>();
  /** {@code peers.size()} for other threads (metrics, tests). */
  private volatile int peerCount;
  private final AtomicLong sent = new AtomicLong();
  /** This thread's reservation just sent, until the prediction of the same decision (which it carries). */
  private final ThreadLocal<Reservation> carried = new ThreadLocal<>();
  private long applied;
  private long malformed;
  private long peersLost;
  private long resent;
  private long peersRefused;
  /** Numbers this replica's messages in the order they are handed to the outbox: held while handing one over. */
  private final Object sequencing = new Object();
  /** The next message's sequence number; under {@link #sequencing}. */
  private long nextSeq = 1;
  /** The first sequence number of the last state this replica sent whole ({@link #resendOwn}); transport thread. */
  private long lastStateFrom;
  private volatile long gaps;
  private volatile long missed;
  private volatile long resyncs;
  private volatile long staleReleased;
  private long duplicates;

  /**
   * Another replica as this one knows it: when it was last heard, its reservations copied here by id, and where its
   * messages' sequence numbers stand.
   */
  private static final class Peer {
    final long id;
    long lastSeenNanos;
    /** Whether it numbers its messages (a replica of before the sequence numbers does not). */
    boolean sequenced;
    /** The last sequence number heard from it. */
    long lastSeq;
    /** Every message of it from this number on was heard (the first heard, or the first after a gap). */
    long heardSince;
    /** A gap was seen and its whole state asked for, not yet received; when it was last asked. */
    boolean resyncWanted;
    long resyncAskedNanos;

    Peer(long id) {
      this.id = id;
    }

    final Map<Long, Copy> reservations = new HashMap<>();
  }

  /** A reservation copied from a peer, and the sequence number of the last message that sent it (0: unnumbered). */
  private static final class Copy {
    final Reservation r;
    long seq;

    Copy(Reservation r, long seq) {
      this.r = r;
      this.seq = seq;
    }
  }

  /** What a message does to its sender's copies here, once read whole; {@code seq} its number, 0 for none. */
  @FunctionalInterface
  private interface Action {
    void apply(Peer peer, long seq);
  }

  /**
   * @param replica this process's identity among the replicas (random per start: a restarted replica is a new one)
   * @param ledger this replica's ledger, where the others' reservations are copied
   * @param overlaps this replica's index, where the others' predictions are recorded
   * @param outbox sends one encoded message to every other replica; must not block
   */
  public ReplicaSync(long replica, LoadLedger ledger, PrefixOverlapSource overlaps, Consumer<byte[]> outbox,
      LongSupplier nanoClock, long peerTimeoutNanos) {
    this(replica, ledger, overlaps, outbox, nanoClock, peerTimeoutNanos, new EnvoyGate(null, WorkerSet::empty));
  }

  /**
   * @param envoys where the others' Envoys views go, and this replica's own comes from (sent only when it serves
   *     xDS)
   */
  public ReplicaSync(long replica, LoadLedger ledger, PrefixOverlapSource overlaps, Consumer<byte[]> outbox,
      LongSupplier nanoClock, long peerTimeoutNanos, EnvoyGate envoys) {
    this(envoys, replica, java.util.Objects.requireNonNull(ledger, "ledger"),
        java.util.Objects.requireNonNull(overlaps, "overlaps"), outbox, nanoClock, peerTimeoutNanos);
  }

  /**
   * A member that routes nothing and only tells the others what the Envoys on its xDS server hold (the {@code xds}
   * mode): see the class comment.
   *
   * @param envoys this process's view ({@link EnvoyGate#servesXds()}); peers' views are not applied to it
   */
  public static ReplicaSync viewOnly(long replica, Consumer<byte[]> outbox, LongSupplier nanoClock,
      long peerTimeoutNanos, EnvoyGate envoys) {
    if (!envoys.servesXds()) {
      throw new IllegalArgumentException("a member that only shares its Envoys' view needs an xDS server's view");
    }
    return new ReplicaSync(envoys, replica, null, null, outbox, nanoClock, peerTimeoutNanos);
  }

  private ReplicaSync(EnvoyGate envoys, long replica, LoadLedger ledger, PrefixOverlapSource overlaps,
      Consumer<byte[]> outbox, LongSupplier nanoClock, long peerTimeoutNanos) {
    this.envoys = envoys;
    this.replica = replica;
    this.ledger = ledger;
    this.overlaps = overlaps;
    this.outbox = outbox;
    this.nanoClock = nanoClock;
    this.peerTimeoutNanos = peerTimeoutNanos;
  }

  public long replica() {
    return replica;
  }

  /** Whether this member only shares its Envoys' view: no ledger, nothing of the others' load kept. */
  public boolean viewOnly() {
    return ledger == null;
  }

  /** Forwards this replica's reservations; install with {@link LoadLedger#setListener}. */
  public LoadLedger.Listener ledgerListener() {
    return new LoadLedger.Listener() {
      @Override
      public void reserved(Reservation r) {
        sendReserved(r);
        if (r.blockHashes().length > 0) {
          carried.set(r); // the decision's prediction follows on this thread: the message just sent carries it
        }
      }

      @Override
      public void prefillDone(Reservation r) {
        sendPrefillDone(r);
      }

      @Override
      public void released(Reservation r) {
        sendReleased(r);
      }
    };
  }

  private void sendReserved(Reservation r) {
    send(packer -> {
      start(packer, RESERVE).packLong(replica).packLong(r.id())
          .packString(r.worker().name()).packInt(r.worker().dpRank()).packLong(r.prefillTokens())
          .packInt(r.uniqueBlocks());
      packHashes(packer, r.blockHashes());
      packer.packLong(r.turn()).packLong(r.promptTokens()).packInt(r.blockSize());
    });
  }

  private void sendPrefillDone(Reservation r) {
    send(packer -> start(packer, PREFILL_DONE).packLong(replica).packLong(r.id()));
  }

  private void sendReleased(Reservation r) {
    send(packer -> start(packer, RELEASED).packLong(replica).packLong(r.id()));
  }

  /**
   * Sends every reservation of this replica still held, as it stands, for a replica that just joined. Transport
   * thread. A reservation that moves while it is being sent is sent again after its move: its own message may have
   * left before this copy (the same queue keeps the order from here on).
   */
  private void resendOwn() {
    long from;
    synchronized (sequencing) {
      from = nextSeq;
    }
    lastStateFrom = from;
    sendEnvoys();
    if (!viewOnly()) {
      sendTurns();
      ledger.forEachOwnLive(r -> {
        sendReserved(r);
        if (r.prefillReleased()) {
          sendPrefillDone(r);
        }
        if (r.released()) {
          sendReleased(r);
        }
        resent++;
      });
    }
    // every reservation held since {@code from} was sent since then (here, or on its own as it moved): one that a
    // replica which heard all of it holds from an older message is gone here, its release lost
    sendHeartbeat(from);
  }

  /** {@code [5, r, stateFrom, seq]}: stateFrom 0, or where the state this replica just sent whole began. */
  private void sendHeartbeat(long stateFrom) {
    send(packer -> start(packer, HEARTBEAT).packLong(replica).packLong(stateFrom));
  }

  /**
   * Every worker's last turn, for a replica that just joined: it starts from none, and until each worker had been
   * given a request its ties would break otherwise than here. Transport thread.
   */
  private void sendTurns() {
    Map<WorkerId, Long> turns = ledger.lastTurns();
    if (turns.isEmpty()) {
      return;
    }
    List<Map.Entry<WorkerId, Long>> all = List.copyOf(turns.entrySet());
    for (int from = 0; from < all.size(); from += TURNS_PER_MESSAGE) {
      List<Map.Entry<WorkerId, Long>> part = all.subList(from, Math.min(all.size(), from + TURNS_PER_MESSAGE));
      send(packer -> {
        start(packer, TURNS).packLong(replica).packArrayHeader(part.size() * 3);
        for (Map.Entry<WorkerId, Long> e : part) {
          packer.packString(e.getKey().name()).packInt(e.getKey().dpRank()).packLong(e.getValue());
        }
      });
    }
  }

  /** {@code source} that also tells the other replicas of every prediction this replica records. */
  public PrefixOverlapSource sharing(PrefixOverlapSource source) {
    return new PrefixOverlapSource() {
      @Override
      public Lookup lookup(long[] blockHashes) {
        return source.lookup(blockHashes);
      }

      @Override
      public void recordPrediction(WorkerId worker, long[] blockHashes) {
        source.recordPrediction(worker, blockHashes);
        Reservation r = carried.get();
        carried.remove();
        if (r != null && r.blockHashes() == blockHashes && r.worker().equals(worker)) {
          return; // the others record it with the reservation, in one message
        }
        send(packer -> {
          start(packer, PREDICTED).packLong(replica).packString(worker.name())
              .packInt(worker.dpRank());
          packHashes(packer, blockHashes);
        });
      }

      @Override
      public long cacheResets() {
        return source.cacheResets();
      }

      @Override
      public String learnedMediaId(long namespace, String routerId) {
        return source.learnedMediaId(namespace, routerId);
      }

      @Override
      public void expectMedia(WorkerId worker, long parent, int offset, long namespace, String routerId,
          List<MediaIdentities.FollowUp> rest) {
        source.expectMedia(worker, parent, offset, namespace, routerId, rest);
      }

      @Override
      public Matcher matcher() {
        return source.matcher();
      }
    };
  }

  /**
   * Tells the others this replica is alive (its copies there are kept while it is heard from), and what its Envoys
   * hold: messages get lost, and a view lost would otherwise stand until the next change.
   */
  public void heartbeat() {
    sendHeartbeat(0);
    sendEnvoys();
  }

  /**
   * Tells the others what the Envoys on this replica's xDS server hold; nothing when it serves none. Any thread:
   * call it when the view changes.
   */
  public void sendEnvoys() {
    if (!envoys.servesXds()) {
      return;
    }
    synchronized (envoysSending) {
      Holding view = envoys.own();
      List<byte[]> names = new ArrayList<>();
      long bytes = 0;
      for (String name : new TreeSet<>(view.workers())) {
        byte[] b = name.getBytes(StandardCharsets.UTF_8);
        bytes += b.length + (b.length < 32 ? 1 : b.length < 256 ? 2 : b.length < 65536 ? 3 : 5); // msgpack's header
        if (bytes > MAX_ENVOY_VIEW_BYTES) {
          if (!envoysCapped) {
            envoysCapped = true;
            log.warn("the workers every Envoy holds take over {} MiB: the other replicas are told the first {} of {} "
                + "and hold the others back", MAX_ENVOY_VIEW_BYTES >> 20, names.size(), view.workers().size());
          }
          break;
        }
        names.add(b);
      }
      send(packer -> {
        start(packer, ENVOYS).packLong(replica).packInt(view.envoys())
            .packArrayHeader(names.size());
        for (byte[] b : names) {
          packer.packRawStringHeader(b.length).writePayload(b);
        }
      });
    }
  }

  /**
   * Copies another replica's message into this replica's ledger or index. Transport thread. The whole message is
   * read and checked before anything changes here: a malformed one (or one of a kind this replica does not know)
   * is counted and changes nothing, and in particular does not make its sender a peer, which would send it every
   * reservation held here.
   */
  public void apply(byte[] message) {
    long from;
    long seq = 0;
    Action action;
    try (MessageUnpacker unpacker = MessagePack.newDefaultUnpacker(message)) {
      Fields in = new Fields(unpacker, message.length);
      int fields = unpacker.unpackArrayHeader();
      int kind = unpacker.unpackInt();
      from = unpacker.unpackLong();
      if (from == replica) {
        return; // our own, looped back
      }
      action = read(kind, fields, in);
      if (action != null && fields >= SEQUENCED_FIELDS[kind]) {
        // the sequence number is the last field: fields a later version adds come before it, skipped here
        for (int i = SEQUENCED_FIELDS[kind]; i < fields; i++) {
          unpacker.skipValue();
        }
        seq = unpacker.unpackLong();
        if (seq <= 0) {
          throw new IOException("sequence number " + seq);
        }
      }
      if (action != null && viewOnly() && kind != HEARTBEAT && kind != SYNC_REQUEST && kind != RESYNC) {
        // read whole and checked all the same: a malformed message still makes no peer
        action = (peer, s) -> { };
      }
    } catch (IOException | RuntimeException e) {
      countMalformed(e);
      return;
    }
    if (action == null) {
      malformed++;
      return;
    }
    Peer peer = peers.get(from);
    if (peer == null) {
      if (peers.size() >= MAX_PEERS) {
        if (peersRefused++ == 0) {
          log.warn("over {} other router replicas heard at once: not hearing the new ones until some fall silent",
              MAX_PEERS);
        }
        return;
      }
      // a replica heard for the first time: tell it what this one has in flight, and ask for its own
      peer = new Peer(from);
      peers.put(from, peer);
      resendOwn();
      send(packer -> start(packer, SYNC_REQUEST).packLong(replica));
    }
    peerCount = peers.size();
    peer.lastSeenNanos = nanoClock.getAsLong();
    if (seq > 0 && !sequenced(peer, seq)) {
      return;
    }
    try {
      action.apply(peer, seq);
      applied++;
    } catch (RuntimeException e) {
      countMalformed(e);
    }
  }

  /**
   * Follows {@code peer}'s sequence numbers to message {@code seq}: a gap (messages lost on the way: the sender's
   * queue full, a high-water mark, a reconnect) asks the peer for its whole state. Returns false for a message heard
   * already (the peer followed at two addresses), not to be applied again. Transport thread.
   */
  private boolean sequenced(Peer peer, long seq) {
    if (!peer.sequenced) {
      // the first numbered message heard from it: it was new here, and asked for all it holds (apply)
      peer.sequenced = true;
      peer.heardSince = seq;
    } else if (seq <= peer.lastSeq) {
      duplicates++;
      return false;
    } else if (seq > peer.lastSeq + 1) {
      long lost = seq - peer.lastSeq - 1;
      if (gaps++ == 0) {
        log.warn("lost {} messages of router replica {} on the link (its send queue full, a high-water mark, a "
            + "reconnect): asking it for what it holds; kvrouter_replicas_gaps_total counts such gaps",
            lost, Long.toHexString(peer.id));
      } else {
        log.debug("lost {} messages of router replica {}", lost, Long.toHexString(peer.id));
      }
      missed += lost;
      peer.heardSince = seq;
      askState(peer, seq, false);
    }
    peer.lastSeq = seq;
    return true;
  }

  /**
   * Asks {@code peer} for its whole state ({@code [9, r, peer, after, seq]}), unless asked within {@link
   * #RESYNC_RETRY_NANOS} (or {@code immediately}); {@code after} is the last of its messages heard here: a state it began
   * sending since answers already. Transport thread.
   */
  private void askState(Peer peer, long after, boolean immediately) {
    if (viewOnly()) {
      return; // it keeps nothing of the others' state: the resend would be read and dropped
    }
    long now = nanoClock.getAsLong();
    if (!immediately && peer.resyncWanted && now - peer.resyncAskedNanos < RESYNC_RETRY_NANOS) {
      return;
    }
    peer.resyncWanted = true;
    peer.resyncAskedNanos = now;
    send(packer -> start(packer, RESYNC).packLong(replica).packLong(peer.id).packLong(after));
  }

  /**
   * {@code peer} sent what it holds whole, from its message {@code from} on: when every message of it since was heard
   * here, a copy not sent since is one it no longer holds (its release was lost) and is released now, not at the
   * ledger's expiry. Transport thread.
   */
  private void stateReceived(Peer peer, long from) {
    if (!peer.sequenced || from < peer.heardSince) {
      if (peer.resyncWanted) {
        askState(peer, peer.lastSeq, true); // heard only part of it: ask again now
      }
      return;
    }
    for (Iterator<Copy> it = peer.reservations.values().iterator(); it.hasNext(); ) {
      Copy c = it.next();
      if (c.seq < from) {
        if (ledger != null) {
          ledger.release(c.r);
        }
        it.remove();
        staleReleased++;
      }
    }
    if (peer.resyncWanted) {
      peer.resyncWanted = false;
      resyncs++;
    }
  }

  /** What a message of {@code kind} does to its sender's copies here, once read whole; null for an unknown kind. */
  private Action read(int kind, int fields, Fields in) throws IOException {
    MessageUnpacker u = in.unpacker;
    return switch (kind) {
      case RESERVE -> {
        long id = u.unpackLong();
        WorkerId worker = new WorkerId(in.string(), u.unpackInt());
        long prefill = u.unpackLong();
        int unique = u.unpackInt();
        long[] hashes = in.hashes();
        long turn = fields > 8 ? u.unpackLong() : 0; // a replica of before the turn sends none
        long promptTokens = fields > 10 ? u.unpackLong() : 0;
        int blockSize = fields > 10 ? u.unpackInt() : 0;
        if (prefill < 0 || unique < 0) {
          throw new IOException("a negative reservation");
        }
        yield (peer, seq) -> {
          Copy held = peer.reservations.get(id);
          if (held != null) { // sent again for a replica that joined: applied once
            held.seq = seq;
          } else {
            if (hashes.length > 0 && fields > 8) {
              // the prediction first: a decision here that sees the request in flight sees where its prompt
              // will be cached, not a cold prefill to avoid (two messages left a gap siblings fell through)
              overlaps.recordPrediction(worker, hashes);
            }
            Reservation r = ledger.reserveRemote(worker, prefill, hashes, unique, turn, promptTokens, blockSize);
            if (r != Reservation.NONE) {
              peer.reservations.put(id, new Copy(r, seq));
            }
          }
        };
      }
      case PREFILL_DONE -> {
        long id = u.unpackLong();
        yield (peer, seq) -> {
          Copy c = peer.reservations.get(id);
          ledger.prefillDone(c == null ? null : c.r);
        };
      }
      case RELEASED -> {
        long id = u.unpackLong();
        yield (peer, seq) -> {
          Copy c = peer.reservations.remove(id);
          ledger.release(c == null ? null : c.r);
        };
      }
      case PREDICTED -> {
        WorkerId worker = new WorkerId(in.string(), u.unpackInt());
        long[] hashes = in.hashes();
        yield (peer, seq) -> overlaps.recordPrediction(worker, hashes);
      }
      case TURNS -> {
        int n = u.unpackArrayHeader();
        // each turn takes three bytes at the least: a count beyond what is left is not a message of a replica
        if (n % 3 != 0 || n > in.left()) {
          throw new IOException("turns of " + n + " values");
        }
        WorkerId[] workers = new WorkerId[n / 3];
        long[] turns = new long[n / 3];
        for (int i = 0; i < n / 3; i++) {
          workers[i] = new WorkerId(in.string(), u.unpackInt());
          turns[i] = u.unpackLong();
        }
        yield (peer, seq) -> {
          for (int i = 0; i < workers.length; i++) {
            ledger.noteTurn(workers[i], turns[i]);
          }
        };
      }
      case ENVOYS -> {
        int envoyCount = u.unpackInt();
        int n = u.unpackArrayHeader();
        // each name takes a byte at the least
        if (envoyCount < 0 || n < 0 || n > in.left()) {
          throw new IOException("Envoys view of " + envoyCount + " Envoys, " + n + " workers");
        }
        Set<String> workers = new HashSet<>();
        for (int i = 0; i < n; i++) {
          workers.add(in.string());
        }
        Holding view = new Holding(envoyCount, workers);
        yield (peer, seq) -> envoys.peer(peer.id, view);
      }
      case HEARTBEAT -> {
        long stateFrom = fields >= SEQUENCED_FIELDS[HEARTBEAT] ? u.unpackLong() : 0;
        if (stateFrom < 0) {
          throw new IOException("a state from " + stateFrom);
        }
        yield (peer, seq) -> {
          if (stateFrom > 0) {
            stateReceived(peer, stateFrom);
          }
        };
      }
      case SYNC_REQUEST -> (peer, seq) -> resendOwn();
      case RESYNC -> {
        long target = u.unpackLong();
        long after = u.unpackLong();
        // another's gap in this replica's messages: all it holds, unless a state begun since it asked is on its way
        yield (peer, seq) -> {
          if (target == replica && lastStateFrom <= after) {
            resendOwn();
          }
        };
      }
      default -> null;
    };
  }

  private void countMalformed(Exception e) {
    if (malformed++ == 0) {
      log.warn("ignoring a malformed message from another router replica: {}", e.toString());
    }
  }

  /**
   * A message being read. Every length in it is checked against the bytes left before anything of that length is
   * allocated: msgpack allocates a payload as its header claims, so fifteen bytes claiming two gigabytes of hashes
   * were an OutOfMemoryError, which ended the link's thread.
   */
  private static final class Fields {
    final MessageUnpacker unpacker;
    private final int size;

    Fields(MessageUnpacker unpacker, int size) {
      this.unpacker = unpacker;
      this.size = size;
    }

    int left() {
      return size - (int) unpacker.getTotalReadBytes();
    }

    String string() throws IOException {
      int n = unpacker.unpackRawStringHeader();
      if (n < 0 || n > left()) {
        throw new IOException("a string of " + n + " bytes in " + left());
      }
      return new String(unpacker.readPayload(n), StandardCharsets.UTF_8);
    }

    long[] hashes() throws IOException {
      int n = unpacker.unpackBinaryHeader();
      // past MAX_HASHES too: no replica sends more, and each hash costs the ledger far more than its 8 bytes here
      if (n < 0 || n % 8 != 0 || n > left() || n / 8 > MAX_HASHES) {
        throw new IOException("hashes of " + n + " bytes in " + left());
      }
      long[] hashes = new long[n / 8];
      ByteBuffer.wrap(unpacker.readPayload(n)).asLongBuffer().get(hashes);
      return hashes;
    }
  }

  /**
   * Releases everything copied from replicas not heard from for the peer timeout, and forgets them. Transport
   * thread; returns how many replicas it dropped.
   */
  public int expireSilent() {
    long now = nanoClock.getAsLong();
    int dropped = 0;
    for (Iterator<Map.Entry<Long, Peer>> it = peers.entrySet().iterator(); it.hasNext(); ) {
      Map.Entry<Long, Peer> e = it.next();
      Peer p = e.getValue();
      // copies the ledger expired itself (their release never came): forget them, or a live peer whose
      // releases get lost would grow this map without bound
      p.reservations.values().removeIf(c -> c.r.released());
      if (now - p.lastSeenNanos > peerTimeoutNanos) {
        if (ledger != null) {
          p.reservations.values().forEach(c -> ledger.release(c.r));
        }
        log.warn("router replica {} silent for {} ms: released its {} copied reservations; its Envoys hold no "
            + "worker back any more", Long.toHexString(e.getKey()), peerTimeoutNanos / 1_000_000,
            p.reservations.size());
        it.remove();
        envoys.forget(e.getKey());
        dropped++;
        peersLost++;
      } else if (p.resyncWanted) {
        askState(p, p.lastSeq, false); // the state asked for did not come whole (the question or part of it lost): again
      }
    }
    peerCount = peers.size();
    return dropped;
  }

  /** Reservations copied from other replicas and not yet released or forgotten. Transport thread. */
  public int copies() {
    int n = 0;
    for (Peer p : peers.values()) {
      n += p.reservations.size();
    }
    return n;
  }

  /** Replicas heard from and not yet timed out; any thread. */
  public int peerCount() {
    return peerCount;
  }

  /** Messages handed to the outbox since start. */
  public long sent() {
    return sent.get();
  }

  /** Other replicas' messages applied since start. Transport thread. */
  public long applied() {
    return applied;
  }

  /** Own reservations sent again to replicas that joined, since start. Transport thread. */
  public long resent() {
    return resent;
  }

  /** Messages that could not be read. Transport thread. */
  public long malformed() {
    return malformed;
  }

  /** Gaps seen in the other replicas' sequence numbers (messages lost on the link), since start. Transport thread. */
  public long gaps() {
    return gaps;
  }

  /** Messages of the other replicas lost on the link, as their sequence numbers tell, since start. Transport thread. */
  public long missed() {
    return missed;
  }

  /** States received whole after a gap (the peer's copies here replaced), since start. Transport thread. */
  public long resyncs() {
    return resyncs;
  }

  /**
   * Copies released because their replica's state, received whole, no longer had them (their release was lost),
   * since start. Transport thread.
   */
  public long staleReleased() {
    return staleReleased;
  }

  /** Messages heard twice (a replica followed at two addresses) and applied once, since start. Transport thread. */
  public long duplicates() {
    return duplicates;
  }

  /** Replicas dropped for silence since start. Transport thread. */
  public long peersLost() {
    return peersLost;
  }

  @FunctionalInterface
  private interface Body {
    void pack(MessageBufferPacker packer) throws IOException;
  }

  /**
   * Packs {@code body} (whose array header counts the sequence number too), numbers it and hands it to the outbox:
   * numbered and handed over under one lock, so the numbers follow the outbox's order and a message the transport
   * drops (its queue full) is a gap the others see.
   */
  private void send(Body body) {
    try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
      body.pack(packer);
      packer.writePayload(SEQ_PLACE);
      byte[] message = packer.toByteArray();
      synchronized (sequencing) {
        ByteBuffer.wrap(message, message.length - 8, 8).putLong(nextSeq++);
        outbox.accept(message);
      }
      sent.incrementAndGet();
    } catch (IOException e) {
      throw new UncheckedIOException(e); // an in-memory buffer does not fail
    }
  }

  /**
   * Starts a message of {@code kind}: its array header counts {@link #SEQUENCED_FIELDS} of the kind, the sequence
   * number {@link #send} appends included.
   */
  private static MessageBufferPacker start(MessageBufferPacker packer, int kind) throws IOException {
    packer.packArrayHeader(SEQUENCED_FIELDS[kind]).packInt(kind);
    return packer;
  }

  private static void packHashes(MessageBufferPacker packer, long[] hashes) throws IOException {
    // a prefix of a prompt's block hashes is the hashes of a shorter prompt: the others see less of it cached
    byte[] b = new byte[Math.min(hashes.length, MAX_HASHES) * 8];
    ByteBuffer.wrap(b).asLongBuffer().put(hashes, 0, b.length / 8);
    packer.packBinaryHeader(b.length).writePayload(b);
  }
}
