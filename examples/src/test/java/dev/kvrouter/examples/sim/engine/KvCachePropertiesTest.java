package dev.kvrouter.examples.sim.engine;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.wire.AllBlocksCleared;
import dev.kvrouter.index.wire.BlockRemoved;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.KvEvent;
import dev.kvrouter.examples.sim.testing.RecordingObserver;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * Random workloads on a small cache: after every step the structural invariants hold (reference counts equal
 * block-table membership, only unreferenced blocks are free, capacity is never exceeded), and an index rebuilt
 * from the published events alone, the way the router builds it, holds exactly the blocks the engine holds.
 */
class KvCachePropertiesTest {

  private static final int BS = 4;
  private static final String MODEL = "m";

  sealed interface Op permits Add, Step, Abort {}

  record Add(int prefix, int suffix, int maxTokens, int namespace) implements Op {}

  record Step() implements Op {}

  record Abort(int which) implements Op {}

  @Provide
  Arbitrary<List<Op>> workloads() {
    Arbitrary<Op> add = Combinators.combine(Arbitraries.integers().between(0, 3),
        Arbitraries.integers().between(0, 23), Arbitraries.integers().between(1, 10),
        Arbitraries.integers().between(0, 2)).as(Add::new);
    Arbitrary<Op> step = Arbitraries.just(new Step());
    Arbitrary<Op> abort = Arbitraries.integers().between(0, 50).map(Abort::new);
    return Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(3, add), net.jqwik.api.Tuple.of(6, step), net.jqwik.api.Tuple.of(1, abort))
        .list().ofMinSize(1).ofMaxSize(120);
  }

  @Property(tries = 200)
  void invariantsHoldAndEventsDescribeTheCacheExactly(@ForAll("workloads") List<Op> ops,
      @ForAll boolean chunked) {
    EngineConfig config = EngineConfig.builder(MODEL).blockSize(BS).numGpuBlocks(24).maxNumSeqs(4)
        .maxNumBatchedTokens(chunked ? 12 : 64).enableChunkedPrefill(chunked).maxModelLen(64).build();
    EngineCore core = EngineCore.create(config, 5L, OutputTokens.range(50, 20));
    RouterStyleIndex index = new RouterStyleIndex();
    List<String> ids = new ArrayList<>();
    Map<String, RecordingObserver> observers = new HashMap<>();
    int[][] prefixes = {seq(8, 1), seq(12, 200), seq(4, 400), seq(16, 600)};
    long now = 0;
    int n = 0;
    for (Op op : ops) {
      if (op instanceof Add a) {
        int[] prompt = concat(prefixes[a.prefix()], seq(a.suffix(), 1000 + 37 * n));
        String salt = a.namespace() == 1 ? "tenant-" + (n % 2) : null;
        String id = "r" + n++;
        RecordingObserver o = new RecordingObserver();
        observers.put(id, o);
        core.add(new RequestSpec(id, prompt, a.maxTokens(), null, salt, n), o, now);
        ids.add(id);
      } else if (op instanceof Abort ab && !ids.isEmpty()) {
        core.abort(ids.get(ab.which() % ids.size()));
      } else {
        ScheduledStep s = core.schedule();
        assertThat(s.totalTokens()).isLessThanOrEqualTo(config.maxNumBatchedTokens());
        now += 1000;
        core.complete(s, 1000, now);
      }
      core.checkInvariants();
      index.apply(core.takeEvents());
      long[] engine = core.pool().cachedIdentities();
      Arrays.sort(engine);
      assertThat(index.identities()).containsExactly(engine);
    }
    for (RecordingObserver o : observers.values()) {
      if (o.outcome != null) {
        assertThat(o.outcome.cachedTokens() % BS).isZero();
        assertThat(o.outcome.cachedTokens()).isLessThan(o.outcome.promptTokens());
        assertThat(o.tokens).hasSize(o.outcome.completionTokens());
      }
    }
  }

  /** The router's view: engine hash handles mapped to identities recomputed from token ids with BlockHasher. */
  static final class RouterStyleIndex {
    private final Map<Long, Long> identityByEngineHash = new HashMap<>();
    private final Map<Long, Integer> count = new HashMap<>();

    void apply(List<KvEvent> events) {
      for (KvEvent e : events) {
        if (e instanceof BlockStored s) {
          long parent;
          if (s.parentBlockHash() == null) {
            String salt = s.extraKeys() == null || s.extraKeys().get(0) == null ? null
                : (String) s.extraKeys().get(0).get(s.extraKeys().get(0).size() - 1);
            parent = new CacheNamespace(MODEL, s.loraName(), salt).rootSeed();
          } else {
            Long p = identityByEngineHash.get(s.parentBlockHash());
            assertThat(p).as("parent of a stored block must be known").isNotNull();
            parent = p;
          }
          for (int i = 0; i < s.blockHashes().length; i++) {
            parent = BlockHasher.blockHash(parent, s.tokenIds(), i * s.blockSize(), s.blockSize(), 0L);
            Long prev = identityByEngineHash.put(s.blockHashes()[i], parent);
            assertThat(prev == null || prev == parent).as("engine hash names one identity").isTrue();
            count.merge(s.blockHashes()[i], 1, Integer::sum);
          }
        } else if (e instanceof BlockRemoved r) {
          for (long h : r.blockHashes()) {
            Integer c = count.get(h);
            assertThat(c).as("removed block must have been stored").isNotNull();
            if (c == 1) {
              count.remove(h);
            } else {
              count.put(h, c - 1);
            }
          }
        } else {
          count.clear();
        }
      }
    }

    long[] identities() {
      List<Long> out = new ArrayList<>();
      count.forEach((h, c) -> {
        for (int i = 0; i < c; i++) {
          out.add(identityByEngineHash.get(h));
        }
      });
      return out.stream().mapToLong(Long::longValue).sorted().toArray();
    }
  }

  private static int[] seq(int n, int start) {
    return dev.kvrouter.examples.sim.testing.Tokens.seq(n, start);
  }

  private static int[] concat(int[] a, int[] b) {
    return dev.kvrouter.examples.sim.testing.Tokens.concat(a, b);
  }
}
