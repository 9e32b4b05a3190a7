package dev.kvrouter.index.wire;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Payloads encoded by the real msgspec (scripts/fixtures/kv_events.py), one set per format generation:
 * the decoder must read each to the values the generator wrote from its Python objects, and where a case
 * names an encoder layout, our encoder must reproduce msgspec's bytes exactly.
 */
class GoldenEventFixturesTest {

  private static final String FIXTURE = "/fixtures/kv_events/kv_events.json";
  private static final HexFormat HEX = HexFormat.of();

  static JsonNode fixtures() throws IOException {
    try (InputStream in = GoldenEventFixturesTest.class.getResourceAsStream(FIXTURE)) {
      if (in == null) {
        throw new AssertionError(FIXTURE + " is missing: run .venv/bin/python scripts/fixtures/kv_events.py");
      }
      return new ObjectMapper().readTree(in);
    }
  }

  @TestFactory
  Stream<DynamicTest> decoderReadsEveryGeneration() throws IOException {
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode c : fixtures().get("cases")) {
      tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> {
        EventBatch decoded = new EventDecoder().decode(HEX.parseHex(c.get("hex").asText()));
        assertThat(decoded).as(c.get("note").asText()).isEqualTo(expected(c.get("expected")));
      }));
    }
    assertThat(tests).hasSizeGreaterThanOrEqualTo(20);
    return tests.stream();
  }

  @TestFactory
  Stream<DynamicTest> encoderReproducesMsgspecBytes() throws IOException {
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode c : fixtures().get("cases")) {
      JsonNode e = c.get("encoder");
      if (e == null || e.isNull()) {
        continue;
      }
      WireLayout layout = WireLayout.valueOf(e.get("layout").asText());
      HashEncoding hashes = HashEncoding.valueOf(e.get("hashes").asText());
      tests.add(DynamicTest.dynamicTest(c.get("name").asText() + " as " + layout, () -> {
        byte[] ours = new EventEncoder(layout, hashes).encode(expected(c.get("expected")));
        assertThat(HEX.formatHex(ours)).isEqualTo(c.get("hex").asText());
      }));
    }
    assertThat(tests).hasSizeGreaterThanOrEqualTo(7);
    return tests.stream();
  }

  /** The capture's values (spec 3.4), written here independently of the fixture's expected section. */
  @Test
  void specVectorsDecodeToTheCapturedEngineHashes() throws IOException {
    JsonNode cases = fixtures().get("cases");
    EventBatch array = new EventDecoder().decode(HEX.parseHex(find(cases, "spec_6_2_array").get("hex").asText()));
    BlockStored s = (BlockStored) array.events().get(0);
    assertThat(Long.toUnsignedString(s.blockHashes()[0])).isEqualTo("17705339885301241772");
    assertThat(Long.toUnsignedString(s.blockHashes()[1])).isEqualTo("13360521540053240825");
    assertThat(s.tokenIds()).hasSize(32).startsWith(2082, 1113, 2142, 374, 264, 4948, 19128, 323);
    assertThat(s.tokenIds()[7 + 8]).isEqualTo(323);
    assertThat(array.ts()).isEqualTo(1_757_500_000.25);
    assertThat(array.dataParallelRank()).isZero();
    assertThat(array.events().get(1)).isEqualTo(BlockRemoved.of("GPU", s.blockHashes()[0]));
    assertThat(array.events().get(2)).isEqualTo(AllBlocksCleared.INSTANCE);

    EventBatch map = new EventDecoder().decode(HEX.parseHex(find(cases, "spec_6_2_map").get("hex").asText()));
    BlockStored m = (BlockStored) map.events().get(0);
    assertThat(m.blockHashes()).containsExactly(s.blockHashes());
    assertThat(m.groupIdx()).isZero();
    assertThat(m.kvCacheSpecKind()).isEqualTo("full_attention");

    // bin digests of the same blocks decode to the same longs (last 8 bytes, big-endian)
    EventBatch bin = new EventDecoder().decode(HEX.parseHex(find(cases, "hashes_bin_last8").get("hex").asText()));
    assertThat(((BlockStored) bin.events().get(0)).blockHashes()).containsExactly(s.blockHashes());
    assertThat(fixtures().get("qwen_capture").get("block0_digest").asText()).endsWith("f5b600d19aef97ac");
  }

  private static JsonNode find(JsonNode cases, String name) {
    for (JsonNode c : cases) {
      if (c.get("name").asText().equals(name)) {
        return c;
      }
    }
    throw new AssertionError("no fixture case " + name);
  }

  static EventBatch expected(JsonNode e) {
    List<KvEvent> events = new ArrayList<>();
    for (JsonNode ev : e.get("events")) {
      switch (ev.get("type").asText()) {
        case "AllBlocksCleared" -> events.add(AllBlocksCleared.INSTANCE);
        case "BlockRemoved" -> events.add(new BlockRemoved(hashes(ev.get("block_hashes")), text(ev, "medium"),
            integer(ev, "group_idx"), text(ev, "locality"), text(ev, "ownership")));
        case "BlockStored" -> {
          JsonNode p = ev.get("parent_block_hash");
          int[] tokens = new int[ev.get("token_ids").size()];
          for (int i = 0; i < tokens.length; i++) {
            tokens[i] = ev.get("token_ids").get(i).asInt();
          }
          events.add(new BlockStored(hashes(ev.get("block_hashes")),
              p.isNull() ? null : Long.parseUnsignedLong(p.asText()), tokens, ev.get("block_size").asInt(),
              integer(ev, "lora_id"), text(ev, "medium"), text(ev, "lora_name"), extraKeys(ev.get("extra_keys")),
              integer(ev, "group_idx"), text(ev, "kv_cache_spec_kind"), integer(ev, "kv_cache_spec_sliding_window"),
              text(ev, "locality"), text(ev, "ownership"), text(ev, "session_id"), text(ev, "cache_salt")));
        }
        default -> throw new AssertionError("unknown expected type " + ev.get("type"));
      }
    }
    JsonNode dp = e.get("data_parallel_rank");
    return new EventBatch(e.get("ts").asDouble(), events, dp.isNull() ? null : dp.asInt(), e.get("skipped").asInt());
  }

  private static long[] hashes(JsonNode a) {
    long[] out = new long[a.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = Long.parseUnsignedLong(a.get(i).asText());
    }
    return out;
  }

  private static String text(JsonNode n, String f) {
    JsonNode v = n.get(f);
    return v == null || v.isNull() ? null : v.asText();
  }

  private static Integer integer(JsonNode n, String f) {
    JsonNode v = n.get(f);
    return v == null || v.isNull() ? null : v.asInt();
  }

  private static List<List<Object>> extraKeys(JsonNode n) {
    if (n == null || n.isNull()) {
      return null;
    }
    List<List<Object>> out = new ArrayList<>();
    for (JsonNode k : n) {
      if (k.isNull()) {
        out.add(null);
      } else {
        @SuppressWarnings("unchecked")
        List<Object> items = (List<Object>) generic(k);
        out.add(items);
      }
    }
    return out;
  }

  private static Object generic(JsonNode n) {
    if (n.isNull()) {
      return null;
    }
    if (n.isArray()) {
      List<Object> l = new ArrayList<>();
      n.forEach(x -> l.add(generic(x)));
      return l;
    }
    if (n.isObject() && n.has("bin")) {
      return HEX.parseHex(n.get("bin").asText());
    }
    if (n.isIntegralNumber()) {
      return n.asLong();
    }
    return n.asText();
  }
}
