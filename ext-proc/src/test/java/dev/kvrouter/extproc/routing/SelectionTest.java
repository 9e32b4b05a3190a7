package dev.kvrouter.extproc.routing;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.load.WorkerLoad;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

class SelectionTest {

  static Candidate scored(String name, double cost, double loadCost) {
    Candidate c = Candidate.of(CostModelTest.worker(name, 1), 0, Overlap.NONE, WorkerLoad.ZERO, 0);
    c.cost = cost;
    c.loadCost = loadCost;
    c.scored = true;
    return c;
  }

  static Map<String, Integer> histogram(int n, java.util.function.Supplier<Candidate> pick) {
    Map<String, Integer> h = new HashMap<>();
    for (int i = 0; i < n; i++) {
      h.merge(pick.get().worker().name(), 1, Integer::sum);
    }
    return h;
  }

  @Test
  void lowestCostWins() {
    List<Candidate> cs = List.of(scored("a", 3, 0), scored("b", 1, 9), scored("c", 2, 0));
    assertThat(Selection.argmin(cs, Candidate::cost, Candidate::loadCost, new Random(7)).worker().name())
        .isEqualTo("b");
  }

  @Test
  void tiesGoToTheLeastLoadedThenAtRandom() {
    List<Candidate> cs = List.of(scored("a", 5, 2), scored("b", 5, 1), scored("c", 5, 1), scored("d", 6, 0));
    Random rng = new Random(42);
    Map<String, Integer> h = histogram(2000, () -> Selection.argmin(cs, Candidate::cost, Candidate::loadCost, rng));
    assertThat(h).containsOnlyKeys("b", "c");
    assertThat(h.get("b")).isBetween(900, 1100);
  }

  @Test
  void aThirdKeyBreaksTheRemainingTiesBeforeChance() {
    List<Candidate> cs = List.of(scored("a", 5, 1), scored("b", 5, 1), scored("c", 5, 1), scored("d", 4, 9));
    Map<String, Long> last = Map.of("a", 7L, "b", 3L, "c", 3L, "d", 0L);
    Random rng = new Random(42);
    // d is cheapest whatever its key; without d, b and c tie on the third key too and split at random
    assertThat(Selection.argmin(cs, Candidate::cost, Candidate::loadCost, c -> last.get(c.worker().name()), rng)
        .worker().name()).isEqualTo("d");
    List<Candidate> abc = cs.subList(0, 3);
    Map<String, Integer> h = histogram(2000,
        () -> Selection.argmin(abc, Candidate::cost, Candidate::loadCost, c -> last.get(c.worker().name()), rng));
    assertThat(h).containsOnlyKeys("b", "c");
    assertThat(h.get("b")).isBetween(900, 1100);
  }

  @Test
  void aFourthKeyDecidesWhatTheThirdLeavesTiedSoNoDrawIsLeft() {
    List<Candidate> cs = List.of(scored("a", 5, 1), scored("b", 5, 1), scored("c", 5, 1));
    Map<String, Long> last = Map.of("a", 7L, "b", 3L, "c", 3L);
    Map<String, Long> then = Map.of("a", -9L, "b", 8L, "c", -2L);
    Random rng = new Random(42);
    // a's fourth key is the lowest but its third is not; between b and c the fourth key decides, every time
    Map<String, Integer> h = histogram(200, () -> Selection.argmin(cs, Candidate::cost, Candidate::loadCost,
        c -> last.get(c.worker().name()), c -> then.get(c.worker().name()), rng));
    assertThat(h).containsExactly(Map.entry("c", 200));
  }

  @Test
  void floatNoiseIsATie() {
    List<Candidate> cs = List.of(scored("a", 1.0, 1), scored("b", 1.0 + 1e-13, 0));
    assertThat(Selection.argmin(cs, Candidate::cost, Candidate::loadCost, new Random(1)).worker().name())
        .isEqualTo("b");
  }

  @Test
  void softmaxFollowsTheNormalisedCosts() {
    // costs 0 and 1, T = 1: p(a) = 1 / (1 + e^-1) = 0.731
    List<Candidate> cs = List.of(scored("a", 0, 0), scored("b", 1, 0));
    Random rng = new Random(3);
    Map<String, Integer> h = histogram(20_000, () -> Selection.softmax(cs, Candidate::cost, 1.0, rng));
    assertThat(h.get("a") / 20_000.0).isBetween(0.711, 0.751);
    // the normalisation makes it scale-free: costs 0 and 1000 sample the same
    List<Candidate> big = List.of(scored("a", 0, 0), scored("b", 1000, 0));
    Random rng2 = new Random(3);
    Map<String, Integer> h2 = histogram(20_000, () -> Selection.softmax(big, Candidate::cost, 1.0, rng2));
    assertThat(h2).isEqualTo(h);
  }

  @Test
  void aLowTemperatureNearlyAlwaysPicksTheBestAndEqualCostsAreUniform() {
    List<Candidate> cs = List.of(scored("a", 0, 0), scored("b", 1, 0), scored("c", 1, 0));
    Random rng = new Random(5);
    Map<String, Integer> h = histogram(5000, () -> Selection.softmax(cs, Candidate::cost, 0.05, rng));
    assertThat(h.getOrDefault("a", 0)).isGreaterThan(4990);
    List<Candidate> eq = List.of(scored("a", 2, 0), scored("b", 2, 0));
    Random rng2 = new Random(6);
    Map<String, Integer> u = histogram(4000, () -> Selection.softmax(eq, Candidate::cost, 1.0, rng2));
    assertThat(u.get("a")).isBetween(1850, 2150);
  }
}
