package dev.kvrouter.index.wire;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;

class EventCodecTest {

  @ParameterizedTest
  @EnumSource(WireLayout.class)
  void randomBatchesRoundTripInEveryLayoutAndHashForm(WireLayout layout) {
    for (HashEncoding he : HashEncoding.values()) {
      EventEncoder enc = new EventEncoder(layout, he);
      EventDecoder dec = new EventDecoder();
      SplittableRandom r = new SplittableRandom(42 + layout.ordinal() * 7 + he.ordinal());
      for (int i = 0; i < 300; i++) {
        List<KvEvent> events = new ArrayList<>();
        int n = r.nextInt(6);
        for (int e = 0; e < n; e++) {
          events.add(WireEvents.random(r, layout));
        }
        EventBatch batch = new EventBatch(1.7e9 + r.nextDouble(), events, r.nextBoolean() ? r.nextInt(8) : null, 0);
        EventBatch back = dec.decode(enc.encode(batch));
        assertThat(back).as("layout %s, hashes %s, batch %d", layout, he, i).isEqualTo(batch);
      }
    }
  }

  /** Every msgpack integer width, signed and unsigned, through the decoder's hand-parsed array path. */
  @Test
  void everyIntegerWidthDecodesInHashAndTokenArrays() {
    long[] hashes = {0, 1, 127, 128, 255, 256, 65535, 65536, 0xFFFF_FFFFL, 0x1_0000_0000L, Long.MAX_VALUE, -1, -32,
        -33, -128, -129, -32768, -32769, Integer.MIN_VALUE, Integer.MIN_VALUE - 1L, Long.MIN_VALUE};
    int[] tokens = {0, 127, 128, 255, 256, 65535, 65536, Integer.MAX_VALUE, -1, -33, -129, -32769, Integer.MIN_VALUE};
    for (HashEncoding he : HashEncoding.values()) {
      for (WireLayout layout : WireLayout.values()) {
        BlockStored s = BlockStored.of(hashes, -5L, java.util.Arrays.copyOf(tokens, 13), 1, "GPU");
        // 21 hashes, 13 tokens: block size 1 does not have to match, the decoder does not check semantics
        EventBatch b = EventBatch.of(2.5, 3, List.of(s, BlockRemoved.of("GPU", hashes)));
        assertThat(new EventDecoder().decode(new EventEncoder(layout, he).encode(b))).as("%s %s", layout, he)
            .isEqualTo(b);
      }
    }
  }

  @Test
  void garbageIsMalformedNotACrash() {
    EventDecoder dec = new EventDecoder();
    assertThatThrownBy(() -> dec.decode(new byte[] {(byte) 0xc1})).isInstanceOf(MalformedEventException.class);
    assertThatThrownBy(() -> dec.decode(new byte[0])).isInstanceOf(MalformedEventException.class);
    // an array32 header claiming 2^31-1 events in a 6-byte payload must not allocate
    assertThatThrownBy(() -> dec.decode(new byte[] {(byte) 0x92, (byte) 0xcb, 0, 0, 0, 0}))
        .isInstanceOf(MalformedEventException.class);
    byte[] huge = {(byte) 0x92, 0x01, (byte) 0xdd, 0x7f, (byte) 0xff, (byte) 0xff, (byte) 0xff};
    assertThatThrownBy(() -> dec.decode(huge)).isInstanceOf(MalformedEventException.class)
        .hasMessageContaining("exceeds the payload");
    // truncated valid batch
    byte[] ok = new EventEncoder(WireLayout.VLLM_MAP).encode(EventBatch.of(1.0, 0,
        List.of(BlockStored.of(new long[] {1, 2}, null, WireEvents.tokens(8, 1), 4, "GPU"))));
    for (int cut = 1; cut < ok.length; cut++) {
      byte[] t = java.util.Arrays.copyOf(ok, cut);
      assertThatThrownBy(() -> dec.decode(t)).as("cut at %d", cut).isInstanceOf(MalformedEventException.class);
    }
    // and the decoder still works afterwards
    assertThat(dec.decode(ok).events()).hasSize(1);
  }

  @Test
  void sequenceFramesAndEndpoints() {
    assertThat(ZmqFrames.seqBytes(0)).containsExactly(0, 0, 0, 0, 0, 0, 0, 0);
    assertThat(ZmqFrames.seqBytes(ZmqFrames.END_SEQ)).containsOnly((byte) 0xff);
    assertThat(ZmqFrames.readSeq(ZmqFrames.seqBytes(5))).isEqualTo(5);
    assertThat(ZmqFrames.readSeq(ZmqFrames.seqBytes(-2))).isEqualTo(-2);
    assertThatThrownBy(() -> ZmqFrames.readSeq(new byte[7])).isInstanceOf(MalformedEventException.class);
    assertThat(ZmqFrames.engineBinds("tcp://*:5557")).isTrue();
    assertThat(ZmqFrames.engineBinds("tcp://indexer:5557")).isFalse();
    assertThat(ZmqFrames.engineBinds("ipc:///tmp/x")).isTrue();
    assertThat(ZmqFrames.offsetEndpoint("tcp://host:5557", 0)).isEqualTo("tcp://host:5557");
    assertThat(ZmqFrames.offsetEndpoint("tcp://host:5557", 3)).isEqualTo("tcp://host:5560");
    assertThat(ZmqFrames.offsetEndpoint("inproc://x", 2)).isEqualTo("inproc://x_dp2");
    assertThatThrownBy(() -> ZmqFrames.offsetEndpoint("ipc:///tmp/x", 1))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
