package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.ab.EngineIdeals;
import dev.kvrouter.examples.loadgen.PolicyPreparer;
import dev.kvrouter.examples.report.AbReport;
import dev.kvrouter.examples.report.PolicyResult;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.report.WorkloadResult;
import dev.kvrouter.examples.sim.http.ScriptedOutput;
import dev.kvrouter.examples.workload.AnswerReuse;
import dev.kvrouter.examples.workload.ChatAnswers;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Chat conversations that resend the model's own answers as text ({@code multi-turn:format=chat,answers=model})
 * through real Envoy: four simulated Llama 3.1 workers (the model's real tokenizer and template) generate the
 * scripted answer a chat request's {@code seed} names, as far as its {@code max_tokens} (the answer's words) lets them:
 * the answer's tokens, its {@code <|eot_id|>} cut (vLLM's length stop), in their KV cache as the virtual-time engine
 * caches them; the load generator resends the text it received in the next turn, whose
 * re-rendered prompt (Llama 3.1's template keeps the answer whole) repeats the answer's blocks.
 *
 * <ul>
 *   <li>every answer streams as the scripted text, no request fails;
 *   <li>kv_aware serves nearly every later turn part of the previous answer from cache (cached tokens past what the
 *       history without the answer could give), and more answer blocks than round-robin;
 *   <li>no policy beats the ideal, which counts the answer blocks as the engine cached them;
 *   <li>the router's predicted cached tokens match the workers' within one block (the truth check).
 * </ul>
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ChatAnswersAbE2eTest {

  static final String MODEL = "meta-llama/Llama-3.1-8B-Instruct";
  // 10 conversations of 3 turns, answers of 40-60 words: 2-3 decode-filled blocks each
  static final String SPEC = "multi-turn:format=chat,answers=model,sessions=10,rate=4,turns=3,think=0.05,system=64,"
      + "user=30..60,output=40..60,seed=9";
  static final int BS = AbRuns.BS;

  @AutoClose
  AbRuns.Fleet fleet;

  @BeforeAll
  void start() throws Exception {
    fleet = AbRuns.Fleet.start(MODEL, "llama3_1", null, 11,
        new ScriptedOutput(WorkloadCatalog.create(SPEC).tokenSpace()));
  }

  @Test
  void kvAwareServesTheNextTurnThePreviousAnswersBlocks(@TempDir Path out) throws Exception {
    Map<String, List<RequestRecord>> records = new LinkedHashMap<>();
    PolicyPreparer keep = (policy, w, ctx) -> ctx.routingOverhead(r -> {
      records.put(policy, r);
      return null;
    }).build();
    EngineIdeals ideals = fleet.ideals();
    ByteArrayOutputStream progress = new ByteArrayOutputStream();
    String before = fleet.stack().routerMetrics();
    AbReport report = fleet.run(List.of(SPEC), List.of("kv_aware", "round_robin"), keep, ideals,
        out, progress);
    String after = fleet.stack().routerMetrics();
    String log = progress.toString(StandardCharsets.UTF_8);

    WorkloadResult section = report.workloads().get(0);
    Workload w = WorkloadCatalog.create(section.spec());
    int n = w.size();
    double ideal = section.idealTokenShare();
    // an answer whose text takes more tokens than its words (a first word Llama's tokenizer splits) loses its last
    // word to max_tokens, as vLLM would cut it, and the client resends the words it received
    ChatAnswers script = fleet.chat().encoder().chatAnswers(w.tokenSpace());
    long cutAndResent = w.requests().stream()
        .filter(q -> w.requests().stream().anyMatch(x -> q.id().equals(x.after()))
            && script.tokens(q.answer()).length - 1 > q.outputTokens())
        .count();
    for (PolicyResult r : List.of(section.result("kv_aware"), section.result("round_robin"))) {
      assertThat(r.counts().failed()).as(r.policy() + " " + r.errors() + "\n" + log).isZero();
      assertThat(r.counts().completed()).isEqualTo(n);
      assertThat(r.notes()).as(r.policy()).contains("model answers: all " + n + " streamed answers were the "
          + "scripted text");
      assertThat(r.sessions().answersResentShort()).isEqualTo(cutAndResent);
      assertThat(r.cache().servedShare()).as(r.policy() + ": no policy beats the ideal")
          .isLessThanOrEqualTo(ideal + 1e-9);
    }

    Map<String, WorkloadRequest> byId = new HashMap<>();
    w.requests().forEach(r -> byId.put(r.id(), r));
    List<RequestRecord> kv = records.get("kv_aware");
    int later = 0;
    int answerHits = 0;
    for (WorkloadRequest r : w.requests()) {
      if (r.after() == null) {
        continue;
      }
      later++;
      WorkloadRequest prev = byId.get(r.after());
      RequestRecord rec = kv.get(r.index());
      RequestRecord p = kv.get(prev.index());
      // the model's answer, its text tokens cut before the end of turn by max_tokens, as the worker reported it
      assertThat(p.completionTokens()).isEqualTo(ideals.answers(w).apply(prev).length);
      // without the answer, the next prompt shares at most the previous prompt's full blocks with anything cached
      int withoutAnswer = ideals.prompts(w).apply(prev).tokens().length / BS * BS;
      if (rec.cachedTokens() > withoutAnswer) {
        answerHits++;
      }
    }
    assertThat(later).isEqualTo(20);
    assertThat(answerHits).as("kv_aware's later turns served part of the previous answer\n" + log)
        .isGreaterThanOrEqualTo(later - 2);

    AnswerReuse ours = served(ideals, w, kv);
    AnswerReuse rr = served(ideals, w, records.get("round_robin"));
    assertThat(ours.keptShare()).as("Llama 3.1's template keeps the whole answer").isEqualTo(1.0);
    assertThat(ours.answerBlocks()).isGreaterThanOrEqualTo(2L * later);
    assertThat(ours.servedShare()).as(log).isGreaterThanOrEqualTo(0.85);
    assertThat(ours.servedBlocks()).isGreaterThan(rr.servedBlocks());

    double within = AbSmokeE2eTest.delta(before, after, "kvrouter_truth_checks_total", "outcome=\"within_block\"");
    double all = AbSmokeE2eTest.delta(before, after, "kvrouter_truth_checks_total", "");
    assertThat(all).isGreaterThanOrEqualTo(2 * n);
    assertThat(within / all).as("predicted vs actual cached tokens within one block\n" + after.lines()
        .filter(l -> l.startsWith("kvrouter_truth_checks_total")).toList()).isGreaterThanOrEqualTo(0.97);
  }

  private static AnswerReuse served(EngineIdeals ideals, Workload w, List<RequestRecord> records) {
    return ideals.answerReuse(w, q -> records.get(q.index()).ok() ? records.get(q.index()).cachedTokens() : -1);
  }
}
