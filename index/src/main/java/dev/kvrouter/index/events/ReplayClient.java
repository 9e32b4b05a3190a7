package dev.kvrouter.index.events;

import dev.kvrouter.index.wire.ZmqFrames;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.IntConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * Replay over the engine's ROUTER socket with a DEALER: sends {@code ["", seq8]}, then reads replies in either
 * layout ({@code ["", topic, seq8, payload]} from vLLM >= 0.26, {@code ["", seq8, payload]} from older vLLM and
 * SGLang) until the end marker (empty payload or an all-{@code 0xff} sequence frame).
 *
 * <p>Owned by one event thread. A timeout leaves replies possibly in flight, so the socket is then discarded
 * and a fresh one is made for the next replay.
 *
 * <p>Replies are read under the event sockets' size limit ({@code events.max_message_bytes}): ZMQ allocates a
 * frame as its header claims, so without one an engine's reply could claim gigabytes. ZMQ drops the connection of
 * a reply over it; the replay then stops as after a timeout, and each such reply is counted.
 */
final class ReplayClient implements StreamFollower.Replayer, AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(ReplayClient.class);

  private final ZContext ctx;
  private final String endpoint;
  private final int timeoutMillis;
  private final int maxBatches;
  private final int reconnectMillis;
  private final int handshakeMillis;
  private final int maxMessageBytes;
  private final IntConsumer onOversize;
  private final BooleanSupplier going;
  /** Written by ZMQ's I/O thread (the socket's event hook), taken by the owner after each round. */
  private final AtomicInteger oversize = new AtomicInteger();
  private ZMQ.Socket dealer;

  /**
   * @param onOversize told, on the owner's thread, how many replies ZMQ dropped for their size
   * @param going false once the owner is shutting down: a replay asks nothing more
   */
  ReplayClient(ZContext ctx, String endpoint, int timeoutMillis, int maxBatches, int reconnectMillis,
      int handshakeMillis, int maxMessageBytes, IntConsumer onOversize, BooleanSupplier going) {
    this.ctx = ctx;
    this.endpoint = endpoint;
    this.timeoutMillis = timeoutMillis;
    this.maxBatches = maxBatches;
    this.reconnectMillis = reconnectMillis;
    this.handshakeMillis = handshakeMillis;
    this.maxMessageBytes = maxMessageBytes;
    this.onOversize = onOversize;
    this.going = going;
  }

  /**
   * A pause this long between two replies of one replay means the engine has stopped sending: its loop sends the
   * whole buffer back to back.
   */
  static final int REPLY_GAP_MILLIS = 250;

  @Override
  public boolean replay(long fromSeq, StreamFollower.BatchSink sink) {
    long next = fromSeq;
    int total = 0;
    while (true) {
      Round r = round(next, sink, maxBatches - total);
      reportOversize();
      total += r.batches();
      if (r.outcome() != Outcome.STOPPED) {
        return r.outcome() == Outcome.ENDED;
      }
      if (!going.getAsBoolean()) {
        // a replay can take max_replay_batches rounds; shutdown waits for this thread to let go of its sockets
        return false;
      }
      if (r.last() < next) {
        // Nothing at or after what was asked for: asking again would get the same answer, each round costing a
        // reply gap of this shard's time, up to the batch cap
        log.warn("replay from {} answered {} with older batches only (up to {}) and stopped; abandoning it",
            endpoint, next, r.last());
        return false;
      }
      // The engine's replies stopped or skipped ahead mid-replay. vLLM (and the publisher modelled on it) sends the
      // buffer on a ROUTER socket at ZMQ's default high-water mark, 1,000 messages, and a ROUTER drops what does
      // not fit at the moment it is sent (the end marker too): a long replay arrives with holes and cut short.
      // Ask again from the first batch missing.
      log.info("replay from {} broke off after {} batches; asking again from {}", endpoint, total, r.last() + 1);
      next = r.last() + 1;
    }
  }

  private enum Outcome { ENDED, STOPPED, FAILED }

  private record Round(Outcome outcome, int batches, long last) {}

  /** One request and its replies, up to {@code budget} batches. */
  private Round round(long fromSeq, StreamFollower.BatchSink sink, int budget) {
    try {
      if (dealer == null) {
        dealer = ZmqSockets.dealer(ctx, endpoint, timeoutMillis, reconnectMillis, handshakeMillis, maxMessageBytes,
            oversize::incrementAndGet);
      }
      if (!dealer.sendMore(new byte[0]) || !dealer.send(ZmqFrames.seqBytes(fromSeq))) {
        log.warn("replay request to {} could not be sent", endpoint);
        discard();
        return new Round(Outcome.FAILED, 0, -1);
      }
    } catch (RuntimeException e) {
      // An endpoint ZMQ cannot connect to (a host name not in DNS yet, a malformed address) fails this worker's
      // replay only: thrown on, it would end the event thread of every worker on the shard
      log.warn("replay request to {} failed: {}", endpoint, e.toString());
      discard();
      return new Round(Outcome.FAILED, 0, -1);
    }
    List<byte[]> frames = new ArrayList<>(4);
    long last = -1;
    for (int n = 0; n <= budget; n++) {
      frames.clear();
      byte[] f = dealer.recv(0);
      if (f == null) {
        discard(); // replies may still be in flight: a fresh socket for the next request
        if (n == 0) {
          log.warn("replay from {} timed out before its first reply", endpoint);
          return new Round(Outcome.FAILED, 0, -1);
        }
        return new Round(Outcome.STOPPED, n, last);
      }
      if (n == 0) {
        dealer.setReceiveTimeOut(Math.min(timeoutMillis, REPLY_GAP_MILLIS));
      }
      frames.add(f);
      while (dealer.hasReceiveMore() && frames.size() < 8) {
        frames.add(dealer.recv(0));
      }
      while (dealer.hasReceiveMore()) {
        dealer.recv(0);
      }
      int k = frames.size();
      if ((k != 3 && k != 4) || frames.get(0).length != 0 || frames.get(k - 2).length != 8) {
        log.warn("replay from {} sent a reply with {} frames; abandoning it", endpoint, k);
        discard();
        return new Round(Outcome.FAILED, n, last);
      }
      byte[] seqFrame = frames.get(k - 2);
      byte[] payload = frames.get(k - 1);
      long seq = ZmqFrames.readSeq(seqFrame);
      if (payload.length == 0 || seq == ZmqFrames.END_SEQ) {
        dealer.setReceiveTimeOut(timeoutMillis);
        return new Round(Outcome.ENDED, n, last);
      }
      if (n > 0 && seq != last + 1) {
        // The buffer is contiguous, so a hole after the first reply is the engine's socket dropping at its
        // high-water mark while it sent (the first reply may skip ahead: the buffer no longer holds fromSeq)
        discard();
        return new Round(Outcome.STOPPED, n, last);
      }
      sink.accept(seq, payload);
      last = seq;
    }
    log.warn("replay from {} exceeded {} batches; abandoning it", endpoint, maxBatches);
    discard();
    return new Round(Outcome.FAILED, budget, last);
  }

  private void reportOversize() {
    int n = oversize.getAndSet(0);
    if (n > 0) {
      log.warn("replay from {}: dropped {} reply message(s) larger than events.max_message_bytes ({})", endpoint, n,
          maxMessageBytes);
      onOversize.accept(n);
    }
  }

  private void discard() {
    if (dealer != null) {
      ctx.destroySocket(dealer);
      dealer = null;
    }
  }

  @Override
  public void close() {
    discard();
  }
}
