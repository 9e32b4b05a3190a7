package dev.kvrouter.examples.workload;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MooncakeReplayTest {

  static Path fixture() {
    Path root = Path.of(System.getProperty("kvrouter.root", "."));
    Path p = root.resolve("examples/src/test/resources/workload/mooncake_small.jsonl");
    assertThat(p).as("test fixture").isRegularFile();
    return p;
  }

  static Workload replay(String... options) {
    String[] kv = Arrays.copyOf(options, options.length + 2);
    kv[options.length] = "file";
    kv[options.length + 1] = fixture().toString();
    return MooncakeReplay.build(WorkloadOptions.of(kv));
  }

  @Test
  void equalHashIdsGiveEqualTokenBlocksAndTheLastBlockIsTrimmed() {
    Workload w = replay();
    assertThat(w.size()).isEqualTo(5);
    int[] a = w.promptTokens(w.requests().get(0)); // ids 1,2,3; 1100 tokens
    int[] b = w.promptTokens(w.requests().get(1)); // ids 1,2;   1024 tokens
    int[] c = w.promptTokens(w.requests().get(2)); // ids 1,2,4; 1536 tokens
    int[] e = w.promptTokens(w.requests().get(4)); // id 1 only, 1300 tokens: blocks 2 and 3 unique filler
    assertThat(a).hasSize(1100);
    assertThat(b).hasSize(1024);
    assertThat(c).hasSize(1536);
    assertThat(e).hasSize(1300);
    assertThat(Arrays.copyOf(a, 1024)).isEqualTo(b);
    assertThat(Arrays.copyOf(c, 1024)).isEqualTo(b);
    assertThat(Arrays.copyOfRange(a, 1024, 1100)).isNotEqualTo(Arrays.copyOfRange(c, 1024, 1100));
    assertThat(Arrays.copyOf(e, 512)).isEqualTo(Arrays.copyOf(a, 512));
    assertThat(Arrays.copyOfRange(e, 512, 1024)).isNotEqualTo(Arrays.copyOfRange(a, 512, 1024));
    // the trimmed block of id 3 is the first 76 tokens of id 3's full block
    TokenSpace space = w.tokenSpace();
    int[] full3 = space.tokens(new Segment(MooncakeReplay.hashBlockSeed(0, 3), 512));
    assertThat(Arrays.copyOfRange(a, 1024, 1100)).isEqualTo(Arrays.copyOf(full3, 76));
    assertThat(Arrays.stream(c).min().getAsInt()).isGreaterThanOrEqualTo(1000);
    assertThat(Arrays.stream(c).max().getAsInt()).isLessThan(128_000);
  }

  @Test
  void blockOnlyDependsOnTheHashIdNotOnTheRequest() {
    int[] x = TokenSpace.DEFAULT.tokens(new Segment(MooncakeReplay.hashBlockSeed(0, 42), 512));
    int[] y = TokenSpace.DEFAULT.tokens(new Segment(MooncakeReplay.hashBlockSeed(0, 42), 512));
    int[] z = TokenSpace.DEFAULT.tokens(new Segment(MooncakeReplay.hashBlockSeed(0, 43), 512));
    assertThat(x).isEqualTo(y).isNotEqualTo(z);
    assertThat(TokenSpace.DEFAULT.tokens(new Segment(MooncakeReplay.hashBlockSeed(7, 42), 512))).isNotEqualTo(x);
  }

  @Test
  void arrivalsFollowTimestampsOverSpeedRebasedToTheFirstRequest() {
    Workload w = replay("speed", "0.5");
    assertThat(w.requests()).extracting(WorkloadRequest::arrivalMicros)
        .containsExactly(0L, 0L, 500_000L, 2_000_000L, 4_000_000L);
    assertThat(w.requests()).extracting(WorkloadRequest::outputTokens).containsExactly(7, 3, 12, 1, 900);
    assertThat(replay("max-output", "10").requests()).extracting(WorkloadRequest::outputTokens)
        .containsExactly(7, 3, 10, 1, 10);
  }

  @Test
  void capsByCountAndTimeWindow() {
    assertThat(replay("max", "2").size()).isEqualTo(2);
    Workload window = replay("from", "300", "to", "2000");
    assertThat(window.requests()).extracting(WorkloadRequest::arrivalMicros).containsExactly(0L, 750_000L);
    assertThat(window.promptTokens(window.requests().get(0))).hasSize(1536);
  }

  @Test
  void scalingShrinksEveryHashBlockAndKeepsTheSharing() {
    Workload w = replay("block", "64");
    int[] a = w.promptTokens(w.requests().get(0));
    int[] b = w.promptTokens(w.requests().get(1));
    int[] c = w.promptTokens(w.requests().get(2));
    // 1100 = 512 + 512 + 76 -> 64 + 64 + ceil(76 * 64 / 512) = 64 + 64 + 10
    assertThat(a).hasSize(138);
    assertThat(b).hasSize(128);
    assertThat(c).hasSize(192);
    assertThat(Arrays.copyOf(a, 128)).isEqualTo(b);
    assertThat(Arrays.copyOf(c, 128)).isEqualTo(b);
    // a scaled block is the prefix of the full block of the same id
    int[] full = replay().promptTokens(replay().requests().get(0));
    assertThat(Arrays.copyOf(a, 64)).isEqualTo(Arrays.copyOf(full, 64));
    assertThat(w.promptTokens(w.requests().get(3))).hasSize(64 + 11); // 600 = 512 + 88 -> ceil(11.0)
  }

  @Test
  void idealReuseOfTheFixtureByHand() {
    // KV block 512 over the fixture, in order:
    // r0 [1,2,3] 1100 tok: 2 full blocks, none seen
    // r1 [1,2]   1024 tok: 2 full blocks seen; last-token rule allows (1024-1)/512 = 1 -> 512 tokens
    // r2 [1,2,4] 1536 tok: 3 full, 2 seen -> 1024 tokens
    // r3 [5,6]    600 tok: 1 full, none
    // r4 [1,+filler] 1300: 2 full, block 0 seen -> 512 tokens
    IdealReuse r = replay().idealReuse(512);
    assertThat(r.promptTokens()).isEqualTo(1100 + 1024 + 1536 + 600 + 1300);
    assertThat(r.fullBlocks()).isEqualTo(2 + 2 + 3 + 1 + 2);
    assertThat(r.reusedBlocks()).isEqualTo(0 + 2 + 2 + 0 + 1);
    assertThat(r.cacheableHitTokens()).isEqualTo(512 + 1024 + 512);
    assertThat(r.uniqueBlocks()).isEqualTo(2 + 1 + 1 + 1);
  }

  @Test
  void badLinesFailWithTheirLineNumber(@TempDir Path dir) throws IOException {
    Path f = dir.resolve("bad.jsonl");
    Files.writeString(f, "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [1]}\n"
        + "{\"timestamp\": 0, \"input_length\": 5}\n");
    assertThatThrownBy(() -> MooncakeTrace.read(f, r -> true, 0)).hasMessageContaining("bad.jsonl:2")
        .hasMessageContaining("not a Mooncake record");
    Files.writeString(f, "{oops\n");
    assertThatThrownBy(() -> MooncakeTrace.read(f, r -> true, 0)).hasMessageContaining("bad.jsonl:1: not JSON");
    assertThatThrownBy(() -> MooncakeReplay.build(WorkloadOptions.of("file", dir.resolve("none.jsonl").toString())))
        .hasMessageContaining("trace file not found");
  }

  /**
   * The real shared trace against an independent reference: scripts/fixtures/mooncake_ideal_reuse.py models each
   * token as (hash id, position) and printed these figures for the whole trace.
   */
  @Test
  void realTraceIdealReuseMatchesTheIndependentReference() {
    Path trace = MooncakeTrace.defaultFile();
    assertThat(trace).as("the shared Mooncake trace (../shared/traces/%s, or -Dkvrouter.traces=<dir>) is needed "
        + "by this test", MooncakeTrace.SYNTHETIC).isRegularFile();
    Workload full = MooncakeReplay.build(WorkloadOptions.of("file", trace.toString()));
    assertThat(full.size()).isEqualTo(3993);
    // python3 scripts/fixtures/mooncake_ideal_reuse.py TRACE --block 512 --kv 512
    assertThat(full.idealReuse(512)).isEqualTo(new IdealReuse(512, 3993, 61_194_628, 117_888, 77_740, 39_802_880,
        40_148));
    // python3 scripts/fixtures/mooncake_ideal_reuse.py TRACE --block 64 --kv 16
    Workload scaled = MooncakeReplay.build(WorkloadOptions.of("file", trace.toString(), "block", "64"));
    assertThat(scaled.idealReuse(16)).isEqualTo(new IdealReuse(16, 3993, 7_651_059, 476_455, 311_250, 4_979_888,
        165_205));
    assertThat(scaled.spanMicros()).isEqualTo(1_022_025_000L);
  }

  @Test
  void requestsKeepTheirTraceOrder() {
    List<WorkloadRequest> r = replay().requests();
    for (int i = 0; i < r.size(); i++) {
      assertThat(r.get(i).index()).isEqualTo(i);
      assertThat(r.get(i).id()).isEqualTo("mooncake-" + i);
    }
  }
}
