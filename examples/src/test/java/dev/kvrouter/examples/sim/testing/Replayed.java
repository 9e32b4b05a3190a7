package dev.kvrouter.examples.sim.testing;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.wire.ZmqFrames;
import java.util.ArrayList;
import java.util.List;
import org.zeromq.ZMQ;

/** What a simulated worker's replay socket returns, raw: the tests' view of its event history. */
public final class Replayed {

  /** One replayed batch: its sequence number and msgpack payload. */
  public record Batch(long seq, byte[] payload) {}

  private Replayed() {}

  /**
   * Asks over {@code dealer} (connected to the worker's ROUTER) for every batch from {@code from} and reads the
   * replies up to the end marker (an empty payload), failing if a reply does not come within 5 s.
   */
  public static List<Batch> from(ZMQ.Socket dealer, long from) {
    dealer.setReceiveTimeOut(5000);
    dealer.sendMore(new byte[0]);
    dealer.send(ZmqFrames.seqBytes(from));
    List<Batch> out = new ArrayList<>();
    for (int i = 0; i < 10_000; i++) {
      List<byte[]> frames = new ArrayList<>();
      byte[] f = dealer.recv(0);
      assertThat(f).as("replay reply within timeout").isNotNull();
      frames.add(f);
      while (dealer.hasReceiveMore()) {
        frames.add(dealer.recv(0));
      }
      // vLLM >= 0.26 layout: ["", topic, seq, payload]
      byte[] payload = frames.get(frames.size() - 1);
      if (payload.length == 0) {
        return out;
      }
      out.add(new Batch(ZmqFrames.readSeq(frames.get(frames.size() - 2)), payload));
    }
    throw new AssertionError("replay did not end");
  }
}
