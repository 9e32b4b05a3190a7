package dev.kvrouter.index.events;

import dev.kvrouter.index.wire.ZmqFrames;
import java.util.ArrayList;
import java.util.List;
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
 */
final class ReplayClient implements StreamFollower.Replayer, AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(ReplayClient.class);

  private final ZContext ctx;
  private final String endpoint;
  private final int timeoutMillis;
  private final int maxBatches;
  private final int reconnectMillis;
  private final int handshakeMillis;
  private ZMQ.Socket dealer;

  ReplayClient(ZContext ctx, String endpoint, int timeoutMillis, int maxBatches, int reconnectMillis,
      int handshakeMillis) {
    this.ctx = ctx;
    this.endpoint = endpoint;
    this.timeoutMillis = timeoutMillis;
    this.maxBatches = maxBatches;
    this.reconnectMillis = reconnectMillis;
    this.handshakeMillis = handshakeMillis;
  }

  @Override
  public boolean replay(long fromSeq, StreamFollower.BatchSink sink) {
    if (dealer == null) {
      dealer = ZmqSockets.dealer(ctx, endpoint, timeoutMillis, reconnectMillis, handshakeMillis);
    }
    if (!dealer.sendMore(new byte[0]) || !dealer.send(ZmqFrames.seqBytes(fromSeq))) {
      log.warn("replay request to {} could not be sent", endpoint);
      discard();
      return false;
    }
    List<byte[]> frames = new ArrayList<>(4);
    for (int n = 0; n <= maxBatches; n++) {
      frames.clear();
      byte[] f = dealer.recv(0);
      if (f == null) {
        log.warn("replay from {} timed out after {} batches", endpoint, n);
        discard();
        return false;
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
        return false;
      }
      byte[] seqFrame = frames.get(k - 2);
      byte[] payload = frames.get(k - 1);
      long seq = ZmqFrames.readSeq(seqFrame);
      if (payload.length == 0 || seq == ZmqFrames.END_SEQ) {
        return true;
      }
      sink.accept(seq, payload);
    }
    log.warn("replay from {} exceeded {} batches; abandoning it", endpoint, maxBatches);
    discard();
    return false;
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
