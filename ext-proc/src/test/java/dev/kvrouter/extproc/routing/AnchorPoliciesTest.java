package dev.kvrouter.extproc.routing;

import static dev.kvrouter.extproc.routing.CostModelTest.cand;
import static dev.kvrouter.extproc.routing.CostModelTest.gpu;
import static dev.kvrouter.extproc.routing.CostModelTest.load;
import static dev.kvrouter.extproc.routing.CostModelTest.prompt;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.kvrouter.extproc.load.WorkerLoad;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The anchors' policies as the A/B runs them: Dynamo's formula and llm-d's precise prefix-cache profile. */
class AnchorPoliciesTest {

  private static Scoring scoring(List<Candidate> cs, Weights w, RequestShape shape, long seed) {
    return scoring(cs, w, shape, new Random(seed));
  }

  private static Scoring scoring(List<Candidate> cs, Weights w, RequestShape shape, Random rng) {
    CostModel.score(cs, w, shape, 0);
    return new Scoring(null, cs, w, shape, true, rng);
  }

  /** Scraped load: {@code waiting} requests queued in the engine, {@code usage} of its KV cache in use. */
  private static WorkerLoad scraped(long waiting, double usage) {
    return new WorkerLoad(0, 0, 0, waiting, waiting, usage, true);
  }

  @Test
  void dynamoScoresWithItsOwnFormulaWhateverTheModelIsConfiguredWith() {
    // Dynamo's documented example (CostModelTest): W2 wins at 10 against 18 and 11 under Dynamo's weights. Under
    // our defaults W3 wins: it holds 8 of 10 blocks and our decode weight is 0.1, so a held block costs a tenth.
    List<Candidate> cs = CostModelTest.dynamosThreeWorkers();
    KvAwarePolicy ours = new KvAwarePolicy();
    assertThat(ours.choose(scoring(cs, ours.weights(Weights.DEFAULTS), prompt(10), 1)).candidate().worker().name())
        .isEqualTo("w3");
    DynamoPolicy dynamo = new DynamoPolicy();
    assertThat(dynamo.weights(Weights.DEFAULTS)).isSameAs(Weights.DYNAMO); // the router scores with these
    RoutingPolicy.Choice c = dynamo.choose(scoring(cs, dynamo.weights(Weights.DEFAULTS), prompt(10), 1));
    assertThat(c.candidate().worker().name()).isEqualTo("w2");
    assertThat(c.candidate().cost()).isEqualTo(20.0); // the documented 10 plus the request's own 10 blocks
    assertThat(c.candidate().creditBlocks()).isEqualTo(5.0); // the reservation follows Dynamo's own credit
  }

  @Test
  void dynamoBreaksTiesAtRandom() {
    // An idle fleet and a prompt nobody holds: every worker costs the same; over 200 draws each is picked.
    Map<String, Integer> picks = new HashMap<>();
    Random rng = new Random(7);
    for (int i = 0; i < 200; i++) {
      List<Candidate> cs = List.of(cand("a", gpu(0), load(0, 0, 0)), cand("b", gpu(0), load(0, 0, 0)),
          cand("c", gpu(0), load(0, 0, 0)));
      picks.merge(new DynamoPolicy().choose(scoring(cs, Weights.DYNAMO, prompt(4), rng)).candidate().worker()
          .name(), 1, Integer::sum);
    }
    assertThat(picks).containsOnlyKeys("a", "b", "c");
    assertThat(picks.values()).allSatisfy(n -> assertThat(n).isBetween(40, 95));
  }

  @Test
  void llmdWeighsPrefixThreeAgainstTwoEachForKvUtilisationAndQueue() {
    // a holds the whole prompt but has the longest queue and a fuller cache: 3 x 1 + 2 x (1 - 0.9) + 2 x 0 = 3.2;
    // b holds nothing, idle: 0 + 2 x 1 + 2 x 1 = 4.0, so b wins; c holds nothing, half full, queue 2 of 4: 0 + 1 + 1.
    List<Candidate> cs = List.of(cand("a", gpu(10), scraped(4, 0.9)), cand("b", gpu(0), scraped(0, 0.0)),
        cand("c", gpu(0), scraped(2, 0.5)));
    Scoring s = scoring(cs, Weights.DEFAULTS, prompt(10), 1);
    assertThat(LlmdPolicy.score(cs.get(0), 10, 10, 0, 4)).isCloseTo(3.2, within(1e-9));
    assertThat(LlmdPolicy.score(cs.get(1), 10, 10, 0, 4)).isCloseTo(4.0, within(1e-9));
    assertThat(LlmdPolicy.score(cs.get(2), 10, 10, 0, 4)).isCloseTo(2.0, within(1e-9));
    RoutingPolicy.Choice c = new LlmdPolicy().choose(s);
    assertThat(c.candidate().worker().name()).isEqualTo("b");
    assertThat(c.reason()).isEqualTo("max_score");
    // With the holder's queue as short as the others' it keeps the request: 3 + 0.2 + 2 = 5.2 against 4.
    List<Candidate> calm = List.of(cand("a", gpu(10), scraped(0, 0.9)), cand("b", gpu(0), scraped(0, 0.0)));
    assertThat(new LlmdPolicy().choose(scoring(calm, Weights.DEFAULTS, prompt(10), 1)).candidate().worker().name())
        .isEqualTo("a");
  }

  @Test
  void llmdNormalisesThePrefixOverItsHoldersSoTheShorterHolderScoresAsNone() {
    // Min-max over the workers holding any of the prompt: 8 blocks -> 1, 2 blocks -> 0 (as a worker holding
    // nothing); a CPU block counts 0.8. One holder alone, or all holders equal: 1 each.
    Candidate longer = cand("a", gpu(8), scraped(0, 0));
    Candidate shorter = cand("b", gpu(2), scraped(0, 0));
    Candidate none = cand("c", gpu(0), scraped(0, 0));
    assertThat(LlmdPolicy.score(longer, 2, 8, 0, 0)).isCloseTo(3 + 2 + 2, within(1e-9));
    assertThat(LlmdPolicy.score(shorter, 2, 8, 0, 0)).isCloseTo(0 + 2 + 2, within(1e-9));
    assertThat(LlmdPolicy.score(none, 2, 8, 0, 0)).isCloseTo(0 + 2 + 2, within(1e-9));
    assertThat(LlmdPolicy.prefixBlocks(new Overlap(2, 5, 0, 0, false))).isCloseTo(6.0, within(1e-9));
    assertThat(LlmdPolicy.score(shorter, 2, 2, 0, 0)).isCloseTo(3 + 2 + 2, within(1e-9));
  }

  @Test
  void llmdIgnoresTheRoutersPredictionsAndBreaksTiesAtRandom() {
    // Predicted entries are not events: a sibling routed a moment ago does not attract the next one, which goes
    // wherever the tie falls (llm-d's speculative entries are optional and off by default).
    Map<String, Integer> picks = new HashMap<>();
    Random rng = new Random(7);
    for (int i = 0; i < 200; i++) {
      List<Candidate> cs = List.of(cand("a", new Overlap(0, 0, 0, 10, false), scraped(0, 0)),
          cand("b", gpu(0), scraped(0, 0)), cand("c", gpu(0), scraped(0, 0)));
      RoutingPolicy.Choice c = new LlmdPolicy().choose(scoring(cs, Weights.DEFAULTS, prompt(10), rng));
      assertThat(c.reason()).isEqualTo("load_only");
      picks.merge(c.candidate().worker().name(), 1, Integer::sum);
    }
    assertThat(picks).containsOnlyKeys("a", "b", "c");
    assertThat(picks.values()).allSatisfy(n -> assertThat(n).isBetween(40, 95));
  }

  @Test
  void llmdReadsAnUnknownScrapeAsAnEmptyIdleWorker() {
    Candidate unknown = cand("a", gpu(0), WorkerLoad.ZERO); // waiting -1, usage NaN
    Candidate busy = cand("b", gpu(0), scraped(3, 0.5));
    assertThat(LlmdPolicy.score(unknown, 0, 0, 0, 3)).isCloseTo(0 + 2 + 2, within(1e-9));
    assertThat(LlmdPolicy.score(busy, 0, 0, 0, 3)).isCloseTo(0 + 1 + 0, within(1e-9));
  }

  @Test
  void bothAreNamedPolicies() {
    assertThat(StandardPolicies.NAMES).contains(DynamoPolicy.NAME, LlmdPolicy.NAME);
    assertThat(StandardPolicies.create()).containsKeys("dynamo", "llm_d");
  }
}
