package dev.kvrouter.extproc.replicas;

import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.Reservation;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.media.MediaIdentities;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
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
 * down) has every copied reservation released by {@link #expireSilent}. Messages are fire-and-forget: one lost
 * reservation is a load error until the peer's timeout or the ledger's expiry, one lost release the same.
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
 * the reservations still held to a replica heard for the first time); hashes as one binary of 8-byte big-endian
 * values. A reservation carries its decision's
 * prediction (the receiver records both from the one message, the prediction first); a separate prediction is
 * sent only for a decision the ledger did not account. The turn ({@link Reservation#turn()}) and the prompt's
 * size came later: a reservation without them (eight fields, from a replica of before) takes the receiver's next
 * turn, is charged as sent, and its prediction is expected in its own message, as such a replica sends it; a
 * replica of before reads the first eight fields of a new one and misses the prediction it carries.
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

  private final long replica;
  private final LoadLedger ledger;
  private final PrefixOverlapSource overlaps;
  private final Consumer<byte[]> outbox;
  private final LongSupplier nanoClock;
  private final long peerTimeoutNanos;
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

  /** Another replica as this one knows it: when it was last heard, and its reservations copied here by id. */
  private static final class Peer {
    long lastSeenNanos;
    final Map<Long, Reservation> reservations = new HashMap<>();
  }

  /**
   * @param replica this process's identity among the replicas (random per start: a restarted replica is a new one)
   * @param ledger this replica's ledger, where the others' reservations are copied
   * @param overlaps this replica's index, where the others' predictions are recorded
   * @param outbox sends one encoded message to every other replica; must not block
   */
  public ReplicaSync(long replica, LoadLedger ledger, PrefixOverlapSource overlaps, Consumer<byte[]> outbox,
      LongSupplier nanoClock, long peerTimeoutNanos) {
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
      packer.packArrayHeader(11).packInt(RESERVE).packLong(replica).packLong(r.id())
          .packString(r.worker().name()).packInt(r.worker().dpRank()).packLong(r.prefillTokens())
          .packInt(r.uniqueBlocks());
      packHashes(packer, r.blockHashes());
      packer.packLong(r.turn()).packLong(r.promptTokens()).packInt(r.blockSize());
    });
  }

  private void sendPrefillDone(Reservation r) {
    send(packer -> packer.packArrayHeader(3).packInt(PREFILL_DONE).packLong(replica).packLong(r.id()));
  }

  private void sendReleased(Reservation r) {
    send(packer -> packer.packArrayHeader(3).packInt(RELEASED).packLong(replica).packLong(r.id()));
  }

  /**
   * Sends every reservation of this replica still held, as it stands, for a replica that just joined. Transport
   * thread. A reservation that moves while it is being sent is sent again after its move: its own message may have
   * left before this copy (the same queue keeps the order from here on).
   */
  private void resendOwn() {
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

  /**
   * Every worker's last turn, for a replica that just joined: it starts from none, and until each worker had been
   * given a request its ties would break otherwise than here. Transport thread.
   */
  private void sendTurns() {
    Map<WorkerId, Long> turns = ledger.lastTurns();
    if (turns.isEmpty()) {
      return;
    }
    send(packer -> {
      packer.packArrayHeader(3).packInt(TURNS).packLong(replica).packArrayHeader(turns.size() * 3);
      for (Map.Entry<WorkerId, Long> e : turns.entrySet()) {
        packer.packString(e.getKey().name()).packInt(e.getKey().dpRank()).packLong(e.getValue());
      }
    });
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
          packer.packArrayHeader(5).packInt(PREDICTED).packLong(replica).packString(worker.name())
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

  /** Tells the others this replica is alive (its copies there are kept while it is heard from). */
  public void heartbeat() {
    send(packer -> packer.packArrayHeader(2).packInt(HEARTBEAT).packLong(replica));
  }

  /** Copies another replica's message into this replica's ledger or index. Transport thread. */
  public void apply(byte[] message) {
    try (MessageUnpacker in = MessagePack.newDefaultUnpacker(message)) {
      int fields = in.unpackArrayHeader();
      int kind = in.unpackInt();
      long from = in.unpackLong();
      if (from == replica) {
        return; // our own, looped back
      }
      Peer peer = peers.get(from);
      if (peer == null) {
        // a replica heard for the first time: tell it what this one has in flight, and ask for its own
        peer = new Peer();
        peers.put(from, peer);
        resendOwn();
        send(packer -> packer.packArrayHeader(2).packInt(SYNC_REQUEST).packLong(replica));
      }
      peerCount = peers.size();
      peer.lastSeenNanos = nanoClock.getAsLong();
      switch (kind) {
        case RESERVE -> {
          long id = in.unpackLong();
          WorkerId worker = new WorkerId(in.unpackString(), in.unpackInt());
          long prefill = in.unpackLong();
          int unique = in.unpackInt();
          long[] hashes = unpackHashes(in);
          long turn = fields > 8 ? in.unpackLong() : 0; // a replica of before the turn sends none
          long promptTokens = fields > 10 ? in.unpackLong() : 0;
          int blockSize = fields > 10 ? in.unpackInt() : 0;
          if (!peer.reservations.containsKey(id)) { // sent again for a replica that joined: applied once
            if (hashes.length > 0 && fields > 8) {
              // the prediction first: a decision here that sees the request in flight sees where its prompt
              // will be cached, not a cold prefill to avoid (two messages left a gap siblings fell through)
              overlaps.recordPrediction(worker, hashes);
            }
            Reservation r = ledger.reserveRemote(worker, prefill, hashes, unique, turn, promptTokens, blockSize);
            if (r != Reservation.NONE) {
              peer.reservations.put(id, r);
            }
          }
        }
        case PREFILL_DONE -> ledger.prefillDone(peer.reservations.get(in.unpackLong()));
        case RELEASED -> ledger.release(peer.reservations.remove(in.unpackLong()));
        case PREDICTED -> {
          WorkerId worker = new WorkerId(in.unpackString(), in.unpackInt());
          overlaps.recordPrediction(worker, unpackHashes(in));
        }
        case TURNS -> {
          int n = in.unpackArrayHeader();
          if (n % 3 != 0) {
            throw new IOException("turns of " + n + " values");
          }
          for (int i = 0; i < n / 3; i++) {
            ledger.noteTurn(new WorkerId(in.unpackString(), in.unpackInt()), in.unpackLong());
          }
        }
        case HEARTBEAT -> { }
        case SYNC_REQUEST -> resendOwn();
        default -> {
          malformed++;
          return;
        }
      }
      applied++;
    } catch (IOException | RuntimeException e) {
      if (malformed++ == 0) {
        log.warn("ignoring a malformed message from another router replica: {}", e.toString());
      }
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
      p.reservations.values().removeIf(Reservation::released);
      if (now - p.lastSeenNanos > peerTimeoutNanos) {
        p.reservations.values().forEach(ledger::release);
        log.warn("router replica {} silent for {} ms: released its {} copied reservations", Long.toHexString(
            e.getKey()), peerTimeoutNanos / 1_000_000, p.reservations.size());
        it.remove();
        dropped++;
        peersLost++;
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

  /** Replicas dropped for silence since start. Transport thread. */
  public long peersLost() {
    return peersLost;
  }

  @FunctionalInterface
  private interface Body {
    void pack(MessageBufferPacker packer) throws IOException;
  }

  private void send(Body body) {
    try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
      body.pack(packer);
      outbox.accept(packer.toByteArray());
      sent.incrementAndGet();
    } catch (IOException e) {
      throw new UncheckedIOException(e); // an in-memory buffer does not fail
    }
  }

  private static void packHashes(MessageBufferPacker packer, long[] hashes) throws IOException {
    byte[] b = new byte[hashes.length * 8];
    ByteBuffer.wrap(b).asLongBuffer().put(hashes);
    packer.packBinaryHeader(b.length).writePayload(b);
  }

  private static long[] unpackHashes(MessageUnpacker in) throws IOException {
    int n = in.unpackBinaryHeader();
    if (n % 8 != 0) {
      throw new IOException("hashes of " + n + " bytes");
    }
    byte[] b = in.readPayload(n);
    long[] hashes = new long[n / 8];
    ByteBuffer.wrap(b).asLongBuffer().get(hashes);
    return hashes;
  }
}
