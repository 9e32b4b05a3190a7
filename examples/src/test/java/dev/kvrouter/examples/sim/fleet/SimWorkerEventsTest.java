package dev.kvrouter.examples.sim.fleet;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.http.FaultControl;
import dev.kvrouter.examples.sim.http.PromptEncoder;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.examples.sim.testing.Replayed;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import dev.kvrouter.index.wire.AllBlocksCleared;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.EventBatch;
import dev.kvrouter.index.wire.EventDecoder;
import dev.kvrouter.index.wire.KvEvent;
import dev.kvrouter.index.wire.WireLayout;
import dev.kvrouter.index.wire.ZmqFrames;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/** A worker's KV events as a subscriber receives them over ZMQ: content, replay, gaps, restart. */
@Timeout(120)
class SimWorkerEventsTest {

  private static final String MODEL = "m";
  private static final HttpClient CLIENT = HttpClient.newHttpClient();
  private final ExecutorService writer = Executors.newFixedThreadPool(2);
  private final ZContext ctx = new ZContext(1);
  private final EventDecoder decoder = new EventDecoder();
  private SimWorker worker;

  @AfterEach
  void stop() throws Exception {
    if (worker != null) {
      worker.close();
    }
    ctx.close();
    writer.shutdownNow();
    writer.awaitTermination(5, TimeUnit.SECONDS);
  }

  private SimWorker start(WireLayout layout) throws Exception {
    EngineConfig config = EngineConfig.builder(MODEL).blockSize(16).numGpuBlocks(64).maxModelLen(4096)
        .maxNumBatchedTokens(512).seed(5).build();
    worker = SimWorker.start(new SimWorker.Spec("w-ev", config, Presets.LLAMA_3_1_8B_H100.timingModel(), null,
        "127.0.0.1", 0, new SimWorker.Events(0, 0, "kv@w-ev@m", layout), null, null), PromptEncoder.tokenIdsOnly(),
        writer);
    return worker;
  }

  private void complete(int[] prompt, String salt) throws Exception {
    StringBuilder b = new StringBuilder("{\"model\":\"" + MODEL + "\",\"max_tokens\":2,\"prompt\":"
        + Arrays.toString(prompt).replace(" ", ""));
    if (salt != null) {
      b.append(",\"cache_salt\":\"").append(salt).append('"');
    }
    b.append('}');
    HttpResponse<String> r = CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + worker.httpPort()
        + "/v1/completions")).timeout(Duration.ofSeconds(20)).POST(HttpRequest.BodyPublishers.ofString(b.toString()))
        .build(), HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
  }

  private void faults(String json) throws Exception {
    HttpResponse<String> r = CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + worker.httpPort()
        + "/admin/faults")).POST(HttpRequest.BodyPublishers.ofString(json)).build(),
        HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
  }

  private record Msg(long seq, EventBatch batch) {}

  /**
   * JeroMQ 0.6.0 occasionally (about 1 to 3 in 100 fresh loopback connections here) stalls a ZMTP handshake
   * until the handshake interval, 30 s by default, expires; a short interval makes the socket give up and
   * reconnect at once. Every connecting socket in these tests sets it.
   */
  private ZMQ.Socket connecting(SocketType type, String endpoint) {
    ZMQ.Socket s = ctx.createSocket(type);
    s.setHandshakeIvl(500);
    if (type == SocketType.SUB) {
      s.subscribe("kv@".getBytes());
    }
    s.connect(endpoint);
    return s;
  }

  /** Asks the replay socket for everything from {@code from}; the reply ends with an empty payload. */
  private List<Msg> replay(long from) {
    try (ZMQ.Socket dealer = connecting(SocketType.DEALER, worker.replayEndpoint())) {
      return Replayed.from(dealer, from).stream().map(b -> new Msg(b.seq(), decoder.decode(b.payload()))).toList();
    }
  }

  private static List<KvEvent> events(List<Msg> msgs) {
    List<KvEvent> out = new ArrayList<>();
    msgs.forEach(m -> out.addAll(m.batch().events()));
    return out;
  }

  private static int[] seq(int n, int start) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = start + i;
    }
    return t;
  }

  @Test
  void storedBlocksCarryTokensFromWhichTheRouterRecomputesIdentity() throws Exception {
    start(WireLayout.VLLM_MAP);
    int[] prompt = seq(600, 100); // two chunks of 512: two BlockStored
    complete(prompt, null);
    List<Msg> msgs = replay(0);
    assertThat(msgs).extracting(Msg::seq).startsWith(0L, 1L);
    List<BlockStored> stored = events(msgs).stream().filter(e -> e instanceof BlockStored)
        .map(e -> (BlockStored) e).toList();
    assertThat(stored).hasSizeGreaterThanOrEqualTo(2);
    assertThat(stored.get(0).parentBlockHash()).isNull();
    assertThat(stored.get(1).parentBlockHash()).isEqualTo(
        stored.get(0).blockHashes()[stored.get(0).blockHashes().length - 1]);
    assertThat(stored.get(0).medium()).isEqualTo("GPU");
    assertThat(stored.get(0).blockSize()).isEqualTo(16);
    int[] tokens = new int[37 * 16];
    int n = 0;
    for (BlockStored s : stored) {
      for (int t : s.tokenIds()) {
        if (n < tokens.length) {
          tokens[n++] = t;
        }
      }
    }
    assertThat(Arrays.copyOf(tokens, 37 * 16)).containsExactly(Arrays.copyOf(prompt, 37 * 16));
    // The router indexes by its own identity, recomputed from token ids; the engine's handles differ.
    long[] identity = BlockHasher.hashFullBlocks(CacheNamespace.of(MODEL).rootSeed(), prompt, 600, 16);
    assertThat(stored.get(0).blockHashes()[0]).isNotEqualTo(identity[0]);
  }

  @Test
  void saltedRequestsCarryTheSaltInExtraKeysOfTheFirstBlock() throws Exception {
    start(WireLayout.VLLM_MAP);
    complete(seq(40, 1), "tenant-7");
    BlockStored s = (BlockStored) events(replay(0)).get(0);
    assertThat(s.extraKeys()).hasSize(2);
    assertThat(s.extraKeys().get(0)).containsExactly("tenant-7");
    assertThat(s.extraKeys().get(1)).isNull();
  }

  @Test
  void sglangLayoutSendsTheSaltAsMetadata() throws Exception {
    start(WireLayout.SGLANG_ARRAY);
    complete(seq(40, 1), "tenant-7");
    try (ZMQ.Socket dealer = connecting(SocketType.DEALER, worker.replayEndpoint())) {
      dealer.setReceiveTimeOut(5000);
      dealer.sendMore(new byte[0]);
      dealer.send(ZmqFrames.seqBytes(0));
      List<byte[]> frames = new ArrayList<>();
      frames.add(dealer.recv(0));
      while (dealer.hasReceiveMore()) {
        frames.add(dealer.recv(0));
      }
      assertThat(frames).hasSize(3); // SGLang replay: ["", seq, payload], no topic frame
      BlockStored s = (BlockStored) decoder.decode(frames.get(2)).events().get(0);
      assertThat(s.cacheSalt()).isEqualTo("tenant-7");
    }
  }

  @Test
  void evictionsArePublishedWhenTheCacheFills() throws Exception {
    start(WireLayout.VLLM_MAP);
    for (int i = 0; i < 4; i++) {
      complete(seq(400, 10_000 * (i + 1)), null); // 25 blocks each into 63
    }
    List<KvEvent> ev = events(replay(0));
    long removed = ev.stream().filter(e -> e instanceof dev.kvrouter.index.wire.BlockRemoved).count();
    assertThat(removed).isPositive();
  }

  @Test
  void aDroppedBatchLeavesAGapThatReplayFills() throws Exception {
    start(WireLayout.VLLM_MAP);
    try (ZMQ.Socket sub = connecting(SocketType.SUB, worker.eventsEndpoint())) {
      sub.setReceiveTimeOut(200);
      // Warm up until the subscription has propagated (PUB drops messages for unknown subscribers).
      long last = -1;
      for (int i = 0; i < 100 && last < 0; i++) {
        complete(seq(20, 50_000 + 100 * i), null);
        byte[] topic = sub.recv(0);
        if (topic != null) {
          last = ZmqFrames.readSeq(sub.recv(0));
          sub.recv(0);
        }
      }
      assertThat(last).as("subscription propagated").isGreaterThanOrEqualTo(0);
      while (sub.recv(0) != null) {
        last = ZmqFrames.readSeq(sub.recv(0));
        sub.recv(0);
      }
      faults("{\"drop_rate\":1.0}");
      complete(seq(20, 90_000), null);
      faults("{\"drop_rate\":0.0}");
      complete(seq(20, 95_000), null);
      sub.setReceiveTimeOut(5000);
      byte[] topic = sub.recv(0);
      assertThat(topic).isNotNull();
      long next = ZmqFrames.readSeq(sub.recv(0));
      sub.recv(0);
      assertThat(next).isEqualTo(last + 2); // one batch numbered and never sent: a gap
      List<Msg> replayed = replay(last + 1);
      assertThat(replayed.get(0).seq()).isEqualTo(last + 1); // replay recovers it
    }
  }

  @Test
  void crashAndRestartResetTheSequenceAndClearTheCache() throws Exception {
    start(WireLayout.VLLM_MAP);
    complete(seq(100, 1), null);
    assertThat(replay(0)).isNotEmpty();
    // The crash runs on the engine thread after the admin call returns: poll until /health says so, well within
    // the down time (generous, so a loaded machine does not miss the window).
    faults("{\"crash_down_ms\":3000}");
    int health = 0;
    long downBy = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
    while (health != 503 && System.nanoTime() < downBy) {
      health = CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + worker.httpPort() + "/health"))
          .build(), HttpResponse.BodyHandlers.ofString()).statusCode();
      if (health != 503) {
        Thread.sleep(10);
      }
    }
    assertThat(health).isEqualTo(503);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!worker.engine().isUp() && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertThat(worker.engine().isUp()).isTrue();
    List<Msg> after = replay(0);
    assertThat(after).isNotEmpty();
    assertThat(after.get(0).seq()).isZero();
    assertThat(after.get(0).batch().events()).containsExactly(AllBlocksCleared.INSTANCE);
    assertThat(worker.state()).isEqualTo(new FaultControl.State(
        dev.kvrouter.examples.sim.events.EventFaults.NONE, 1.0, true));
  }

  @Test
  void aKilledProcessRefusesConnectionsUntilANewOneListensOnTheSamePort() throws Exception {
    start(WireLayout.VLLM_MAP);
    complete(seq(100, 1), null);
    int port = worker.httpPort();
    URI health = URI.create("http://127.0.0.1:" + port + "/health");
    worker.kill(TimeUnit.MILLISECONDS.toNanos(1500));
    // the listening socket is closed before kill returns: connection refused, not a 503
    assertThatThrownBy(() -> CLIENT.send(HttpRequest.newBuilder(health).build(), HttpResponse.BodyHandlers.ofString()))
        .isInstanceOf(java.net.ConnectException.class);
    assertThat(worker.httpPort()).isEqualTo(port);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    int status = 0;
    while (status != 200 && System.nanoTime() < deadline) {
      try {
        status = CLIENT.send(HttpRequest.newBuilder(health).build(), HttpResponse.BodyHandlers.ofString())
            .statusCode();
      } catch (java.net.ConnectException e) {
        Thread.sleep(20);
      }
    }
    assertThat(status).as("the new process on the same port").isEqualTo(200);
    List<Msg> after = replay(0);
    assertThat(after.get(0).seq()).isZero();
    assertThat(after.get(0).batch().events()).containsExactly(AllBlocksCleared.INSTANCE);
  }
}
