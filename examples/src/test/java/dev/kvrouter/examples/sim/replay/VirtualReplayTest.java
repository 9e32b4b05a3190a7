package dev.kvrouter.examples.sim.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.examples.sim.timing.Presets;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class VirtualReplayTest {

  private static MooncakeTrace.Request req(long ts, int len, int... ids) {
    return new MooncakeTrace.Request(ts, len, 4, ids);
  }

  @Test
  void equalHashIdsGiveEqualTokenBlocksAndTheLastBlockIsTrimmed() {
    int[] a = req(0, 1100, 1, 2, 3).promptTokens(128256, 0);
    int[] b = req(0, 1024, 1, 2).promptTokens(128256, 1);
    int[] c = req(0, 1024, 1, 9).promptTokens(128256, 2);
    assertThat(a).hasSize(1100);
    assertThat(Arrays.copyOf(a, 1024)).containsExactly(b);
    assertThat(Arrays.copyOf(c, 512)).containsExactly(Arrays.copyOf(b, 512));
    assertThat(Arrays.copyOfRange(c, 512, 1024)).isNotEqualTo(Arrays.copyOfRange(b, 512, 1024));
    assertThat(Arrays.stream(a).allMatch(t -> t >= 1000 && t < 128256)).isTrue();
  }

  @Test
  void blocksBeyondTheHashIdsAreFillerOfTheirRequestAlone() {
    // two records of one id and 1024 tokens: their second blocks have no id, so they must not look shared (the
    // filler was keyed on the block alone, so every such request shared it and the engine found false hits)
    int[] a = req(0, 1024, 5).promptTokens(128_000, 0);
    int[] b = req(0, 1024, 9).promptTokens(128_000, 1);
    assertThat(Arrays.copyOfRange(a, 512, 1024)).isNotEqualTo(Arrays.copyOfRange(b, 512, 1024));
    // deterministic: the same request gets the same filler
    assertThat(req(0, 1024, 5).promptTokens(128_000, 0)).containsExactly(a);
  }

  @Test
  void readsTheTraceFormat(@TempDir Path dir) throws IOException {
    Path f = dir.resolve("t.jsonl");
    Files.writeString(f, "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 6, \"hash_ids\": [0, 1]}\n"
        + "\n{\"timestamp\": 250, \"input_length\": 13, \"output_length\": 1, \"hash_ids\": [0]}\n");
    List<MooncakeTrace.Request> r = MooncakeTrace.read(f);
    assertThat(r).hasSize(2);
    assertThat(r.get(1).timestampMillis()).isEqualTo(250);
    assertThat(r.get(0).hashIds()).containsExactly(0, 1);
    Files.writeString(f, "{\"timestamp\": 0}\n");
    assertThatThrownBy(() -> MooncakeTrace.read(f)).hasMessageContaining(":1:");
  }

  @Test
  void idealReuseCountsBlocksWhosePrefixWasSeenBefore() {
    List<MooncakeTrace.Request> t = List.of(req(0, 1536, 1, 2, 3), req(0, 1536, 1, 2, 4), req(0, 1024, 5, 2));
    // second request reuses 2 of 3 blocks; the third shares id 2 but not its prefix
    assertThat(VirtualReplayHarness.idealReuse(t)).isEqualTo(2.0 / 8);
  }

  @Test
  void aReplayIsDeterministicAndAffinityBeatsRoundRobinOnSharedPrefixes() {
    List<MooncakeTrace.Request> t = new java.util.ArrayList<>();
    for (int i = 0; i < 200; i++) {
      int doc = i % 5;
      t.add(new MooncakeTrace.Request(i * 100L, 4096 + 37, 8,
          new int[] {doc * 10, doc * 10 + 1, doc * 10 + 2, doc * 10 + 3, doc * 10 + 4, doc * 10 + 5, doc * 10 + 6,
              doc * 10 + 7, 100_000 + i}));
    }
    VirtualReplayHarness.Options rr = new VirtualReplayHarness.Options("t", 4, Presets.DEFAULT, 16, 1.0,
        "round_robin", null);
    VirtualReplayHarness.Options aff = new VirtualReplayHarness.Options("t", 4, Presets.DEFAULT, 16, 1.0,
        "prefix_affinity", null);
    Map<String, Object> a = VirtualReplayHarness.replay(t, rr);
    Map<String, Object> b = VirtualReplayHarness.replay(t, rr);
    a.remove("wall_seconds");
    a.remove("requests_per_wall_second");
    b.remove("wall_seconds");
    b.remove("requests_per_wall_second");
    assertThat(b).isEqualTo(a);
    assertThat(a.get("finished")).isEqualTo(200L);
    Map<String, Object> c = VirtualReplayHarness.replay(t, aff);
    assertThat((double) c.get("cache_hit_rate")).isGreaterThan((double) a.get("cache_hit_rate"));
    assertThat((double) c.get("cache_hit_rate")).isGreaterThan(0.8);
  }
}
