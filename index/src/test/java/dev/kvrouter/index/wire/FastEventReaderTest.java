package dev.kvrouter.index.wire;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link FastEventReader} against {@link EventDecoder}, the decoder it stands in front of: whenever the fast reader
 * takes a payload, its {@link EventBuffer} must hold exactly what the decoder returns (compared as records with
 * {@link EventBuffer#toBatch()}); whenever the decoder rejects a payload, the fast reader must not take it. One
 * reader and one buffer serve every payload of a test, so leftovers from a larger earlier batch would show.
 */
class FastEventReaderTest {

  private static final HexFormat HEX = HexFormat.of();

  private final FastEventReader fast = new FastEventReader();
  private final EventBuffer buffer = new EventBuffer();
  private final EventDecoder decoder = new EventDecoder();

  /** Returns whether the fast reader took the payload, after checking it against the decoder. */
  private boolean agree(byte[] payload, String what) {
    boolean took = fast.read(payload, buffer);
    EventBatch decoded;
    try {
      decoded = decoder.decode(payload);
    } catch (MalformedEventException e) {
      assertThat(took).as("%s: the decoder rejects it (%s), the fast reader took it", what, e.getMessage()).isFalse();
      return false;
    }
    if (took) {
      assertThat(buffer.toBatch()).as(what).isEqualTo(decoded);
    }
    return took;
  }

  @Test
  void takesEveryMsgspecFixtureAndReadsItAsTheDecoderDoes() throws Exception {
    List<String> declined = new ArrayList<>();
    int cases = 0;
    for (JsonNode c : GoldenEventFixturesTest.fixtures().get("cases")) {
      String name = c.get("name").asText();
      if (!agree(HEX.parseHex(c.get("hex").asText()), name)) {
        declined.add(name);
      }
      cases++;
    }
    assertThat(cases).isGreaterThanOrEqualTo(20);
    // every generation's real output is on the fast path; nothing in the fixtures needs the general decoder
    assertThat(declined).isEmpty();
  }

  @Test
  void randomBatchesInEveryLayoutAndHashFormAreTakenAndEqual() {
    for (WireLayout layout : WireLayout.values()) {
      for (HashEncoding he : HashEncoding.values()) {
        EventEncoder enc = new EventEncoder(layout, he);
        SplittableRandom r = new SplittableRandom(7 + layout.ordinal() * 13 + he.ordinal());
        for (int i = 0; i < 300; i++) {
          EventBatch batch = randomBatch(r, layout, 12);
          String what = layout + " " + he + " batch " + i;
          assertThat(agree(enc.encode(batch), what)).as(what).isTrue();
          assertThat(buffer.toBatch()).as(what).isEqualTo(batch);
        }
      }
    }
  }

  /**
   * Flipped, dropped, inserted bytes and truncations of valid payloads: the fast reader may decline anything,
   * but what it takes must be what the decoder returns, and it must take nothing the decoder rejects.
   */
  @Test
  void mutatedPayloadsAreNeverReadDifferentlyFromTheDecoder() {
    SplittableRandom r = new SplittableRandom(99);
    int taken = 0;
    int rejected = 0;
    for (int i = 0; i < 30_000; i++) {
      WireLayout layout = WireLayout.values()[r.nextInt(WireLayout.values().length)];
      HashEncoding he = HashEncoding.values()[r.nextInt(HashEncoding.values().length)];
      byte[] p = new EventEncoder(layout, he).encode(randomBatch(r, layout, 4));
      byte[] m = mutate(r, p);
      String what = "mutation " + i + " of " + layout + " " + he + ": " + HEX.formatHex(m);
      if (agree(m, what)) {
        taken++;
      } else {
        rejected++;
      }
    }
    // both outcomes occur, so both branches of the check ran
    assertThat(taken).isPositive();
    assertThat(rejected).isPositive();
  }

  @Test
  void bufferLoadedFromRecordsGivesTheRecordsBack() {
    SplittableRandom r = new SplittableRandom(5);
    for (WireLayout layout : WireLayout.values()) {
      for (int i = 0; i < 200; i++) {
        EventBatch batch = randomBatch(r, layout, 12);
        assertThat(buffer.load(batch).toBatch()).isEqualTo(batch);
      }
    }
    BlockStored unsupported = new BlockStored(new long[] {1, 2}, null, null, 16, null, "GPU", null, null, null, null,
        null, null, null, null, null);
    EventBatch b = new EventBatch(3.0, List.of(unsupported), null, 2);
    assertThat(buffer.load(b).toBatch()).isEqualTo(b);
    assertThat(buffer.has(0, EventBuffer.TOKENS_UNSUPPORTED)).isTrue();
  }

  /**
   * A worker's buffer grows to its largest batch (a long prompt's tokens, a burst of stores); it gives that back
   * once a run of batches shows it is not needed, rather than holding each worker's peak for good.
   */
  @Test
  void aBufferGivesBackWhatOneLargeBatchMadeItGrow() {
    long fresh = buffer.footprintBytes();
    List<KvEvent> large = new ArrayList<>();
    for (int e = 0; e < 2000; e++) {
      large.add(BlockStored.of(new long[16], null, new int[16 * 16], 16, "GPU"));
    }
    buffer.load(new EventBatch(1.0, large, null, 0));
    assertThat(buffer.footprintBytes()).isGreaterThan(fresh + 2000L * 16 * 16 * 4);
    EventBatch small = new EventBatch(2.0, List.of(BlockStored.of(new long[] {1}, null, new int[16], 16, "GPU")),
        null, 0);
    for (int i = 0; i < 200; i++) {
      assertThat(buffer.load(small).toBatch()).isEqualTo(small);
    }
    assertThat(buffer.footprintBytes()).isEqualTo(fresh);
  }

  @Test
  void unsupportedTokenFormatsAndUnknownEventsAreReadLikeTheDecoder() {
    // an event whose token_ids are pairs (EAGLE bigrams) is kept with unsupported tokens; an unknown tag is skipped
    byte[] payload = HEX.parseHex(
        "93" + "cb41d9a3dd4a000000" // [ts,
            + "93" // events: [
            + "93" + "ab426c6f636b53746f726564" + "9101" + "c0" // ["BlockStored", [1], nil ... (3 of 4 slots)
            + "92" + "a3466f6f" + "01" // ["Foo", 1]
            + "94" + "ab426c6f636b53746f726564" + "9102" + "c0" + "9192" + "0102" // ["BlockStored", [2], nil, [[1, 2]]]
            + "05"); // dp rank 5]
    assertThat(agree(payload, "hand-made")).isTrue();
    EventBatch b = buffer.toBatch();
    assertThat(b.skippedEvents()).isEqualTo(1);
    assertThat(b.events()).hasSize(2);
    assertThat(((BlockStored) b.events().get(1)).tokenIds()).isNull();
    assertThat(b.dataParallelRank()).isEqualTo(5);
  }

  /**
   * Map events whose keys come in a different order from one event to the next, with unknown keys of the same
   * length as known ones and repeated keys, so the reader's guess of the next key is often wrong; and token ids in
   * every msgpack integer form (fixint, uint8/16/32, negative, beyond int), some arrays ending the payload.
   */
  @Test
  void shuffledKeysLookalikeKeysAndEveryTokenFormAreReadLikeTheDecoder() throws Exception {
    SplittableRandom r = new SplittableRandom(17);
    String[] lookalikes = {"typo", "block_hashez", "token_idz", "mediun", "lora_namf", "block_sizd", "Type"};
    long[] tokenValues = {0, 5, 127, 128, 255, 256, 65_535, 65_536, 151_935, Integer.MAX_VALUE, -1, -200,
        1L << 31, (1L << 32) - 1};
    int taken = 0;
    for (int round = 0; round < 400; round++) {
      org.msgpack.core.MessageBufferPacker p = org.msgpack.core.MessagePack.newDefaultBufferPacker();
      int events = 1 + r.nextInt(8);
      p.packArrayHeader(2);
      p.packDouble(1.7e9);
      p.packArrayHeader(events);
      for (int e = 0; e < events; e++) {
        boolean stored = r.nextInt(3) > 0;
        List<Runnable> fields = new ArrayList<>();
        fields.add(() -> pack(p, "type", q -> q.packString(stored ? "BlockStored" : "BlockRemoved")));
        int blocks = 1 + r.nextInt(3);
        fields.add(() -> pack(p, "block_hashes", q -> {
          q.packArrayHeader(blocks);
          for (int i = 0; i < blocks; i++) {
            q.packLong(r.nextLong());
          }
        }));
        fields.add(() -> pack(p, "medium", q -> q.packString(r.nextBoolean() ? "GPU" : "CPU")));
        if (stored) {
          fields.add(() -> pack(p, "parent_block_hash", q -> {
            if (r.nextBoolean()) {
              q.packNil();
            } else {
              q.packLong(r.nextLong());
            }
          }));
          fields.add(() -> pack(p, "token_ids", q -> {
            int n = blocks * 4;
            q.packArrayHeader(n);
            for (int i = 0; i < n; i++) {
              long v = r.nextInt(10) == 0 ? tokenValues[r.nextInt(tokenValues.length)] : r.nextInt(152_000);
              q.packLong(v);
            }
          }));
          fields.add(() -> pack(p, "block_size", q -> q.packInt(4)));
          fields.add(() -> pack(p, "lora_name", q -> q.packNil()));
        }
        for (int k = r.nextInt(3); k > 0; k--) {
          String key = lookalikes[r.nextInt(lookalikes.length)];
          fields.add(() -> pack(p, key, q -> q.packInt(7)));
        }
        if (r.nextInt(4) == 0) {
          fields.add(fields.get(r.nextInt(fields.size()))); // a repeated key
        }
        if (r.nextBoolean()) {
          java.util.Collections.shuffle(fields, new java.util.Random(r.nextLong()));
        }
        p.packMapHeader(fields.size());
        fields.forEach(Runnable::run);
      }
      if (agree(p.toByteArray(), "shuffled round " + round)) {
        taken++;
      }
    }
    // most rounds have no token beyond int, and nothing else here is outside the fast path
    assertThat(taken).isGreaterThan(200);
  }

  private interface Value {
    void pack(org.msgpack.core.MessagePacker p) throws java.io.IOException;
  }

  private static void pack(org.msgpack.core.MessagePacker p, String key, Value v) {
    try {
      p.packString(key);
      v.pack(p);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  private static EventBatch randomBatch(SplittableRandom r, WireLayout layout, int maxEvents) {
    List<KvEvent> events = new ArrayList<>();
    int n = r.nextInt(maxEvents + 1);
    for (int e = 0; e < n; e++) {
      events.add(WireEvents.random(r, layout));
    }
    return new EventBatch(1.7e9 + r.nextDouble(), events, r.nextBoolean() ? r.nextInt(8) : null, 0);
  }

  private static byte[] mutate(SplittableRandom r, byte[] p) {
    byte[] m = p.clone();
    switch (r.nextInt(4)) {
      case 0 -> {
        for (int k = 1 + r.nextInt(3); k > 0; k--) {
          m[r.nextInt(m.length)] = (byte) r.nextInt(256);
        }
      }
      case 1 -> m = Arrays.copyOf(m, r.nextInt(m.length));
      case 2 -> {
        int at = r.nextInt(m.length);
        byte[] n = new byte[m.length - 1];
        System.arraycopy(m, 0, n, 0, at);
        System.arraycopy(m, at + 1, n, at, m.length - at - 1);
        m = n;
      }
      default -> {
        int at = r.nextInt(m.length + 1);
        byte[] n = new byte[m.length + 1];
        System.arraycopy(m, 0, n, 0, at);
        n[at] = (byte) r.nextInt(256);
        System.arraycopy(m, at, n, at + 1, m.length - at);
        m = n;
      }
    }
    return m;
  }
}
