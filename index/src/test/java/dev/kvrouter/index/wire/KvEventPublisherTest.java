package dev.kvrouter.index.wire;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/** The publisher against raw JeroMQ sockets: frames, sequence numbers, replay in both layouts, faults. */
@Timeout(60)
class KvEventPublisherTest {

  private final ZContext ctx = new ZContext(1);
  private final List<KvEventPublisher> publishers = new ArrayList<>();
  private static final Clock CLOCK = Clock.fixed(Instant.ofEpochSecond(1_757_500_000L, 250_000_000), ZoneOffset.UTC);

  @AfterEach
  void close() {
    publishers.forEach(KvEventPublisher::close);
    ctx.close();
  }

  private KvEventPublisher start(ReplayLayout replay) {
    PublisherConfig cfg = PublisherConfig.vllm("tcp://127.0.0.1:*").withBind(true)
        .withReplay("tcp://127.0.0.1:*", replay).withTopic("kv@w1@m").withDataParallelRank(2).withClock(CLOCK);
    KvEventPublisher p = KvEventPublisher.start(cfg);
    publishers.add(p);
    return p;
  }

  private ZMQ.Socket subscribe(KvEventPublisher p) {
    ZMQ.Socket sub = ctx.createSocket(SocketType.SUB);
    sub.setReceiveTimeOut(5000);
    sub.setHandshakeIvl(1000); // JeroMQ handshake stalls, see SubscriberConfig
    sub.subscribe("kv@".getBytes());
    sub.connect(p.endpoint());
    return sub;
  }

  /** Publishes empty warm-up batches until the subscription has propagated; returns the first seq seen. */
  private static long warmUp(KvEventPublisher p, ZMQ.Socket sub) {
    sub.setReceiveTimeOut(50);
    for (int i = 0; i < 200; i++) {
      p.publish(List.of());
      p.flush(Duration.ofSeconds(5));
      byte[] topic = sub.recv(0);
      if (topic != null) {
        long seq = ZmqFrames.readSeq(sub.recv(0));
        sub.recv(0);
        // drain any further warm-up messages
        while (true) {
          byte[] more = sub.recv(0);
          if (more == null) {
            break;
          }
          seq = ZmqFrames.readSeq(sub.recv(0));
          sub.recv(0);
        }
        sub.setReceiveTimeOut(5000);
        return seq;
      }
    }
    throw new AssertionError("subscription never propagated");
  }

  private static long[] recvSeqAndCheckFrames(ZMQ.Socket sub, EventDecoder dec, List<EventBatch> out) {
    byte[] topic = sub.recv(0);
    assertThat(topic).as("message within timeout").isNotNull();
    assertThat(new String(topic)).isEqualTo("kv@w1@m");
    assertThat(sub.hasReceiveMore()).isTrue();
    long seq = ZmqFrames.readSeq(sub.recv(0));
    assertThat(sub.hasReceiveMore()).isTrue();
    out.add(dec.decode(sub.recv(0)));
    assertThat(sub.hasReceiveMore()).isFalse();
    return new long[] {seq};
  }

  @Test
  void sendsThreeFramesWithConsecutiveSequenceAndDpRank() {
    KvEventPublisher p = start(ReplayLayout.WITH_TOPIC);
    ZMQ.Socket sub = subscribe(p);
    long first = warmUp(p, sub);
    EventDecoder dec = new EventDecoder();
    List<EventBatch> got = new ArrayList<>();
    BlockStored s = BlockStored.of(new long[] {-1L, 7}, null, WireEvents.tokens(32, 1), 16, "GPU");
    p.publish(List.of(s));
    p.publish(List.of(BlockRemoved.of("GPU", 7)));
    long a = recvSeqAndCheckFrames(sub, dec, got)[0];
    long b = recvSeqAndCheckFrames(sub, dec, got)[0];
    assertThat(a).isEqualTo(first + 1);
    assertThat(b).isEqualTo(first + 2);
    assertThat(got.get(0).events()).containsExactly(s);
    assertThat(got.get(0).dataParallelRank()).isEqualTo(2);
    assertThat(got.get(0).ts()).isEqualTo(1_757_500_000.25);
    assertThat(p.lastSeq()).isEqualTo(first + 2);
  }

  @Test
  void dropNextAdvancesSequenceAndReplayRecoversInBothLayouts() {
    for (ReplayLayout layout : ReplayLayout.values()) {
      KvEventPublisher p = start(layout);
      ZMQ.Socket sub = subscribe(p);
      long first = warmUp(p, sub);
      p.dropNext(2);
      for (int i = 0; i < 3; i++) {
        p.publish(List.of(BlockRemoved.of("GPU", 100 + i)));
      }
      EventDecoder dec = new EventDecoder();
      List<EventBatch> got = new ArrayList<>();
      long seq = recvSeqAndCheckFrames(sub, dec, got)[0];
      assertThat(seq).as("two batches dropped").isEqualTo(first + 3);
      assertThat(p.droppedBatches()).isEqualTo(2);

      List<long[]> replayed = replay(p, first + 1, layout, dec, got);
      assertThat(replayed).extracting(x -> x[0]).containsExactly(first + 1, first + 2, first + 3);
      assertThat(got.subList(1, 4)).extracting(bt -> ((BlockRemoved) bt.events().get(0)).blockHashes()[0])
          .containsExactly(100L, 101L, 102L);
      assertThat(p.replayRequests()).isEqualTo(1);
    }
  }

  /** A DEALER replay client written from the spec, independent of the subscriber under test. */
  private List<long[]> replay(KvEventPublisher p, long from, ReplayLayout layout, EventDecoder dec,
      List<EventBatch> out) {
    ZMQ.Socket dealer = ctx.createSocket(SocketType.DEALER);
    dealer.setReceiveTimeOut(5000);
    dealer.setHandshakeIvl(1000);
    dealer.connect(p.replayEndpoint());
    dealer.sendMore(new byte[0]);
    dealer.send(ZmqFrames.seqBytes(from));
    List<long[]> seqs = new ArrayList<>();
    while (true) {
      List<byte[]> frames = new ArrayList<>();
      byte[] f = dealer.recv(0);
      assertThat(f).as("replay reply within timeout").isNotNull();
      frames.add(f);
      while (dealer.hasReceiveMore()) {
        frames.add(dealer.recv(0));
      }
      assertThat(frames.get(0)).isEmpty();
      int expected = layout == ReplayLayout.WITH_TOPIC ? 4 : 3;
      assertThat(frames).hasSize(expected);
      byte[] seqFrame = frames.get(expected - 2);
      byte[] payload = frames.get(expected - 1);
      if (ZmqFrames.readSeq(seqFrame) == ZmqFrames.END_SEQ) {
        assertThat(payload).isEmpty();
        if (layout == ReplayLayout.WITH_TOPIC) {
          assertThat(frames.get(1)).isEmpty();
        }
        break;
      }
      if (layout == ReplayLayout.WITH_TOPIC) {
        assertThat(new String(frames.get(1))).isEqualTo("kv@w1@m");
      }
      seqs.add(new long[] {ZmqFrames.readSeq(seqFrame)});
      out.add(dec.decode(payload));
    }
    ctx.destroySocket(dealer);
    return seqs;
  }

  @Test
  void holdAndReverseReordersTheWire() {
    KvEventPublisher p = start(ReplayLayout.WITH_TOPIC);
    ZMQ.Socket sub = subscribe(p);
    long first = warmUp(p, sub);
    p.holdAndReverse(3);
    for (int i = 0; i < 3; i++) {
      p.publish(List.of(BlockRemoved.of(null, i)));
    }
    EventDecoder dec = new EventDecoder();
    List<EventBatch> got = new ArrayList<>();
    long[] order = new long[3];
    for (int i = 0; i < 3; i++) {
      order[i] = recvSeqAndCheckFrames(sub, dec, got)[0] - first;
    }
    assertThat(order).containsExactly(3, 2, 1);
  }

  @Test
  void restartStartsANewLifetimeFromZeroWithAnEmptyBuffer() {
    KvEventPublisher p = start(ReplayLayout.WITHOUT_TOPIC);
    ZMQ.Socket sub = subscribe(p);
    warmUp(p, sub);
    String endpoint = p.endpoint();
    p.restart();
    assertThat(p.endpoint()).isEqualTo(endpoint);
    assertThat(p.lastSeq()).isEqualTo(-1);
    long seq = warmUp(p, sub); // SUB reconnects by itself
    assertThat(seq).isLessThan(200);
    EventDecoder dec = new EventDecoder();
    List<EventBatch> got = new ArrayList<>();
    List<long[]> replayed = replay(p, 0, ReplayLayout.WITHOUT_TOPIC, dec, got);
    assertThat(replayed).extracting(x -> x[0]).first().isEqualTo(0L);
    assertThat(replayed).hasSize((int) p.lastSeq() + 1);
  }

  @Test
  void stopPublishingWithholdsButKeepsNumbering() {
    KvEventPublisher p = start(ReplayLayout.WITH_TOPIC);
    ZMQ.Socket sub = subscribe(p);
    long first = warmUp(p, sub);
    p.stopPublishing();
    p.publish(List.of(AllBlocksCleared.INSTANCE));
    p.flush(Duration.ofSeconds(5));
    sub.setReceiveTimeOut(200);
    assertThat(sub.recv(0)).isNull();
    p.resumePublishing();
    p.publish(List.of(AllBlocksCleared.INSTANCE));
    sub.setReceiveTimeOut(5000);
    long seq = recvSeqAndCheckFrames(sub, new EventDecoder(), new ArrayList<>())[0];
    assertThat(seq).isEqualTo(first + 2);
  }

  @Test
  void delayedSendsKeepOrder() {
    KvEventPublisher p = start(ReplayLayout.WITH_TOPIC);
    ZMQ.Socket sub = subscribe(p);
    long first = warmUp(p, sub);
    p.setDelay(Duration.ofMillis(100));
    long t0 = System.nanoTime();
    p.publish(List.of(AllBlocksCleared.INSTANCE));
    p.setDelay(Duration.ZERO);
    p.publish(List.of(AllBlocksCleared.INSTANCE));
    EventDecoder dec = new EventDecoder();
    List<EventBatch> got = new ArrayList<>();
    assertThat(recvSeqAndCheckFrames(sub, dec, got)[0]).isEqualTo(first + 1);
    assertThat(System.nanoTime() - t0).isGreaterThanOrEqualTo(Duration.ofMillis(90).toNanos());
    assertThat(recvSeqAndCheckFrames(sub, dec, got)[0]).isEqualTo(first + 2);
  }

  @Test
  void closingWhileBusyLeavesZmqClean() throws Exception {
    // close() used to interrupt the publisher thread; landing inside a JeroMQ call, the interrupt closed the NIO
    // pipe of a socket's mailbox and ZMQ's I/O thread printed a ClosedChannelException at shutdown. Closing while
    // the thread drains a queue of batches is when it is inside such calls.
    java.io.PrintStream err = System.err;
    java.io.ByteArrayOutputStream captured = new java.io.ByteArrayOutputStream();
    System.setErr(new java.io.PrintStream(captured, true));
    try {
      for (int i = 0; i < 30; i++) {
        KvEventPublisher p = KvEventPublisher.start(PublisherConfig.vllm("tcp://127.0.0.1:*").withBind(true)
            .withReplay("tcp://127.0.0.1:*", ReplayLayout.WITH_TOPIC).withTopic("kv@w1@m").withClock(CLOCK));
        for (int b = 0; b < 200; b++) {
          p.publish(List.of());
        }
        p.close();
      }
      Thread.sleep(200); // ZMQ's I/O threads finish terminating after close returns
    } finally {
      System.setErr(err);
    }
    assertThat(captured.toString()).doesNotContain("ZMQException").doesNotContain("ZError")
        .doesNotContain("ClosedChannelException").doesNotContain("ClosedByInterruptException");
  }
}
