package dev.kvrouter.index.events;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.wire.ZmqFrames;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiConsumer;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongFunction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

@Timeout(60)
class ReplayClientTest {

  /**
   * A replay socket that holds batches {@code 0 .. size-1} and answers each request with at most {@code cut} of
   * them, without its end marker when it cuts, and with {@code hole} the first time it sends them left out: what
   * a ROUTER at its high-water mark does to a long replay (it drops whatever does not fit when it is sent).
   */
  private static Thread server(ZContext ctx, ZMQ.Socket router, int size, int cut, long[] hole,
      AtomicInteger requests) {
    return server(ctx, router, size, cut, hole, requests, seq -> new byte[] {(byte) seq, 1});
  }

  /** The same, each batch's payload made by {@code payload}. */
  private static Thread server(ZContext ctx, ZMQ.Socket router, int size, int cut, long[] hole,
      AtomicInteger requests, LongFunction<byte[]> payload) {
    boolean[] holed = new boolean[1];
    return serve(router, requests, (id, from) -> {
      long end = Math.min(size, from + cut);
      for (long seq = from; seq < end; seq++) {
        if (hole != null && !holed[0] && seq >= hole[0] && seq < hole[1]) {
          holed[0] = seq == hole[1] - 1;
          continue;
        }
        reply(router, id, seq, payload.apply(seq));
      }
      if (end == size) {
        reply(router, id, ZmqFrames.END_SEQ, new byte[0]);
      }
    });
  }

  /** Answers each replay request (the client's identity and the sequence asked for) with {@code answer}. */
  static Thread serve(ZMQ.Socket router, AtomicInteger requests, BiConsumer<byte[], Long> answer) {
    Thread t = new Thread(() -> {
      router.setReceiveTimeOut(100);
      while (!Thread.currentThread().isInterrupted()) {
        byte[] id = router.recv(0);
        if (id == null) {
          continue;
        }
        router.recv(0); // delimiter
        long from = ZmqFrames.readSeq(router.recv(0));
        requests.incrementAndGet();
        answer.accept(id, from);
      }
    }, "replay-server");
    t.setDaemon(true);
    t.start();
    return t;
  }

  static void reply(ZMQ.Socket router, byte[] id, long seq, byte[] payload) {
    router.sendMore(id);
    router.sendMore(new byte[0]);
    router.sendMore(ZmqFrames.seqBytes(seq));
    router.send(payload);
  }

  /** What one replay delivered, whether it reached the end marker, and how many requests it took. */
  private record Replayed(List<Long> seqs, boolean ended, int requests) {

    /** Asserts it delivered {@code first, first + 1, ...} up to its end marker, in order. */
    void isCompleteFrom(long first, int count) {
      assertThat(ended).isTrue();
      assertThat(seqs).hasSize(count);
      for (int i = 0; i < count; i++) {
        assertThat(seqs.get(i)).isEqualTo(first + i);
      }
    }
  }

  private static Replayed replay(int size, int cut, long[] hole, long from, int maxBatches) throws Exception {
    AtomicInteger requests = new AtomicInteger();
    try (ZContext ctx = new ZContext()) {
      ZMQ.Socket router = ctx.createSocket(SocketType.ROUTER);
      router.setLinger(0);
      int port = router.bindToRandomPort("tcp://127.0.0.1");
      Thread t = server(ctx, router, size, cut, hole, requests);
      List<Long> got = new ArrayList<>();
      boolean ended;
      try (ReplayClient c = new ReplayClient(ctx, "tcp://127.0.0.1:" + port, 2000, maxBatches, 100, 1000,
          SubscriberConfig.DEFAULT_MAX_MESSAGE_BYTES, n -> { }, () -> true)) {
        ended = c.replay(from, (seq, payload) -> got.add(seq));
      } finally {
        t.interrupt();
        t.join(5000);
      }
      return new Replayed(got, ended, requests.get());
    }
  }

  @Test
  void aReplayCutShortIsAskedAgainFromWhereItStoppedUntilItsEndMarker() throws Exception {
    Replayed r = replay(2500, 1000, null, 0, 20_000);
    r.isCompleteFrom(0, 2500);
    assertThat(r.requests()).as("0.., 1000.., 2000..").isEqualTo(3);
  }

  @Test
  void aHoleInTheMiddleOfAReplyIsAskedAgainFromItsFirstMissingBatch() throws Exception {
    // from 500: 500..999, a hole at 1000..1063, then 1064..1499 cut; asked again from 1000, then from 2000
    Replayed r = replay(2200, 1000, new long[] {1000, 1064}, 500, 20_000);
    r.isCompleteFrom(500, 1700);
    assertThat(r.requests()).isEqualTo(3);
  }

  @Test
  void aReplayFromTheMiddleAndOneThatFitsTakeOneRequest() throws Exception {
    Replayed r = replay(1500, 1000, null, 700, 20_000);
    r.isCompleteFrom(700, 800);
    assertThat(r.requests()).isEqualTo(1);
  }

  @Test
  void aReplayEndpointThatCannotBeConnectedFailsTheReplayAndLeavesNoSocket() {
    // a host not in DNS (yet), a malformed address: ZMQ throws at connect
    for (String endpoint : List.of("tcp://no-such-host.invalid:5558", "tcp://127.0.0.1")) {
      try (ZContext ctx = new ZContext(1);
          ReplayClient c = new ReplayClient(ctx, endpoint, 2000, 100, 100, 1000,
              SubscriberConfig.DEFAULT_MAX_MESSAGE_BYTES, n -> { }, () -> true)) {
        List<Long> got = new ArrayList<>();
        assertThat(c.replay(0, (seq, payload) -> got.add(seq))).as(endpoint).isFalse();
        assertThat(got).isEmpty();
        assertThat(ctx.getSockets()).as("sockets of " + endpoint).isEmpty();
      }
    }
  }

  /**
   * ZMQ allocates a frame as its header claims. A reply over {@code events.max_message_bytes} ends the connection
   * before it is read: the replay stops there (what came before it is kept), is counted, and the next request goes
   * out on a fresh socket.
   */
  @Test
  void aReplyOverTheSizeLimitIsNeverReadAndIsCounted() throws Exception {
    int limit = 64 << 10;
    try (ZContext ctx = new ZContext()) {
      ZMQ.Socket router = ctx.createSocket(SocketType.ROUTER);
      router.setLinger(0);
      int port = router.bindToRandomPort("tcp://127.0.0.1");
      AtomicInteger requests = new AtomicInteger();
      // batches 0..2 and the end marker, batch 1 larger than the limit
      Thread t = server(ctx, router, 3, 3, null, requests, seq -> new byte[seq == 1 ? 4 * limit : 16]);
      List<Long> got = new ArrayList<>();
      AtomicInteger oversize = new AtomicInteger();
      try (ReplayClient c = new ReplayClient(ctx, "tcp://127.0.0.1:" + port, 1000, 100, 100, 1000, limit,
          oversize::addAndGet, () -> true)) {
        assertThat(c.replay(0, (seq, payload) -> got.add(seq))).as("never reached its end marker").isFalse();
        assertThat(got).as("batch 0 read, nothing from the oversize reply on").containsExactly(0L);
        assertThat(oversize.get()).as("each request's oversize reply counted").isEqualTo(2);
        assertThat(requests.get()).as("from 0, then again from 1 on a fresh socket").isEqualTo(2);
        assertThat(ctx.getSockets()).as("the failed replay's socket is gone").containsExactly(router);
      } finally {
        t.interrupt();
        t.join(5000);
      }
    }
  }

  /**
   * A replay socket that ignores the sequence asked for and answers every request with the same old batch and no
   * end marker (a misconfigured or hostile engine). Each answer looked like a replay cut short, so the client asked
   * again from the batch after it, up to max_replay_batches times (20,000 by default, over 80 minutes at the
   * 250 ms reply gap each), with the worker's event thread, and every other worker on its shard, deaf meanwhile.
   * A round that brings nothing at or after what it asked for is a failed replay.
   */
  @Test
  void aReplyOlderThanAskedThatStallsIsNotAskedAgain() throws Exception {
    try (ZContext ctx = new ZContext()) {
      ZMQ.Socket router = ctx.createSocket(SocketType.ROUTER);
      router.setLinger(0);
      int port = router.bindToRandomPort("tcp://127.0.0.1");
      AtomicInteger requests = new AtomicInteger();
      // the sequence asked for is ignored
      Thread t = serve(router, requests, (id, from) -> reply(router, id, 3, new byte[] {3, 1}));
      List<Long> got = new ArrayList<>();
      try (ReplayClient c = new ReplayClient(ctx, "tcp://127.0.0.1:" + port, 2000, 40, 100, 1000,
          SubscriberConfig.DEFAULT_MAX_MESSAGE_BYTES, n -> { }, () -> true)) {
        assertThat(c.replay(10, (seq, payload) -> got.add(seq))).as("never reached an end marker").isFalse();
      } finally {
        t.interrupt();
        t.join(5000);
      }
      assertThat(requests.get()).as("asked once, not again for what the engine does not send").isEqualTo(1);
    }
  }

  @Test
  void theBatchCapHoldsAcrossRequests() throws Exception {
    Replayed r = replay(5000, 1000, null, 0, 2500);
    assertThat(r.ended()).as("abandoned at the cap").isFalse();
    assertThat(r.seqs().size()).isBetween(2500, 2501);
  }
}
