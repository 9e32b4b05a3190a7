package dev.kvrouter.examples.workload;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

class SyntheticWorkloadsTest {

  @Test
  void sharedPrefixSplitsEachPromptBySharingRatio() {
    Workload w = WorkloadCatalog.create("system-prompt:count=50,prompt=1000,sharing=0.3,prefixes=2,format=tokens");
    Map<String, List<WorkloadRequest>> byPrefix =
        w.requests().stream().collect(Collectors.groupingBy(WorkloadRequest::sessionId));
    assertThat(byPrefix).containsOnlyKeys("prefix-0", "prefix-1");
    for (List<WorkloadRequest> group : byPrefix.values()) {
      int[] first = w.promptTokens(group.get(0));
      for (WorkloadRequest r : group) {
        int[] t = w.promptTokens(r);
        assertThat(t).hasSize(1000);
        assertThat(Arrays.copyOf(t, 300)).isEqualTo(Arrays.copyOf(first, 300));
        if (r != group.get(0)) {
          assertThat(t[300]).isNotEqualTo(first[300]); // the suffix is unique (a collision is 1 in 127,000)
        }
      }
    }
    int[] a = w.promptTokens(byPrefix.get("prefix-0").get(0));
    int[] b = w.promptTokens(byPrefix.get("prefix-1").get(0));
    assertThat(Arrays.copyOf(a, 16)).isNotEqualTo(Arrays.copyOf(b, 16));
  }

  @Test
  void sharedPrefixInChatPutsThePrefixInTheSystemMessage() {
    Workload w = WorkloadCatalog.create("system-prompt:count=20,prompt=200,sharing=0.5,prefixes=1");
    List<ChatMessage> m0 = w.chatMessages(w.requests().get(0));
    List<ChatMessage> m1 = w.chatMessages(w.requests().get(1));
    assertThat(m0).extracting(ChatMessage::role).containsExactly("system", "user");
    assertThat(m0.get(0)).isEqualTo(m1.get(0));
    assertThat(m0.get(1)).isNotEqualTo(m1.get(1));
    assertThat(m0.get(0).content().split(" ")).hasSize(100);
    Workload unshared = WorkloadCatalog.create("system-prompt:count=2,sharing=0");
    assertThat(unshared.chatMessages(unshared.requests().get(0))).extracting(ChatMessage::role)
        .containsExactly("user");
  }

  @Test
  void sharedPrefixWithFixedQuestionsRepeatsWholePrompts() {
    Workload w = WorkloadCatalog.create(
        "system-prompt:count=400,prompt=100,sharing=0.6,prefixes=3,questions=4,format=tokens");
    Map<String, Set<List<Integer>>> distinct = new java.util.TreeMap<>();
    for (WorkloadRequest r : w.requests()) {
      List<Integer> t = Arrays.stream(w.promptTokens(r)).boxed().toList();
      distinct.computeIfAbsent(r.sessionId(), k -> new HashSet<>()).add(t);
    }
    assertThat(distinct).hasSize(3);
    for (Set<List<Integer>> prompts : distinct.values()) {
      // about 133 draws of 4 questions: every question shows up, and no fifth one
      assertThat(prompts).hasSize(4);
      Set<List<Integer>> prefixes = new HashSet<>();
      for (List<Integer> p : prompts) {
        prefixes.add(p.subList(0, 60));
      }
      assertThat(prefixes).hasSize(1);
    }
    // the same question index under another prefix is another question
    Set<List<Integer>> suffixes = new HashSet<>();
    distinct.values().forEach(ps -> ps.forEach(p -> suffixes.add(p.subList(60, 100))));
    assertThat(suffixes).hasSize(12);
    assertThatThrownBy(() -> WorkloadCatalog.create("system-prompt:questions=-1"))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void multiTurnContextOpensEachSessionWithItsOwnLognormalPrefix() {
    Workload w = WorkloadCatalog.create(
        "multi-turn:sessions=400,turns=2..3,system=0,user=10,output=5,context=1000,context_max=3000,format=tokens");
    Map<String, List<WorkloadRequest>> sessions =
        w.requests().stream().collect(Collectors.groupingBy(WorkloadRequest::sessionId));
    double sum = 0;
    int max = 0;
    Set<Integer> firstTokens = new HashSet<>();
    for (List<WorkloadRequest> turns : sessions.values()) {
      int[] first = w.promptTokens(turns.get(0));
      int context = first.length - 10;
      assertThat(context).isBetween(1, 3000);
      sum += context;
      max = Math.max(max, context);
      firstTokens.add(first[0]);
      int[] second = w.promptTokens(turns.get(1));
      assertThat(Arrays.copyOf(second, first.length)).isEqualTo(first);
      assertThat(second).hasSize(first.length + 5 + 10);
    }
    // lognormal with mean 1000, median 850: the sample mean of 400 sessions lands near 1000 (sd of the mean
    // about 30), a few sessions reach far above it, and each session's context is its own
    assertThat(sum / sessions.size()).isBetween(880.0, 1120.0);
    assertThat(max).isGreaterThan(2000);
    assertThat(firstTokens.size()).isGreaterThan(390);
    Workload none = WorkloadCatalog.create("multi-turn:sessions=3,turns=1,system=0,user=10,format=tokens");
    none.requests().forEach(r -> assertThat(none.promptTokens(r)).hasSize(10));
  }

  @Test
  void multiTurnResendsTheGrowingConversation() {
    Workload w = WorkloadCatalog.create("multi-turn:sessions=5,turns=3..5,system=40");
    Map<String, List<WorkloadRequest>> sessions =
        w.requests().stream().collect(Collectors.groupingBy(WorkloadRequest::sessionId));
    assertThat(sessions).hasSize(5);
    for (List<WorkloadRequest> turns : sessions.values()) {
      assertThat(turns.size()).isBetween(3, 5);
      for (int k = 1; k < turns.size(); k++) {
        List<ChatMessage> prev = w.chatMessages(turns.get(k - 1));
        List<ChatMessage> cur = w.chatMessages(turns.get(k));
        assertThat(turns.get(k).arrivalMicros()).isGreaterThanOrEqualTo(turns.get(k - 1).arrivalMicros());
        assertThat(cur.subList(0, prev.size())).isEqualTo(prev);
        assertThat(cur).hasSize(prev.size() + 2);
        assertThat(cur.get(prev.size()).role()).isEqualTo("assistant");
        // the resent answer is as long as the previous turn asked for
        assertThat(cur.get(prev.size()).content().split(" ")).hasSize(turns.get(k - 1).outputTokens());
        assertThat(cur.get(cur.size() - 1).role()).isEqualTo("user");
      }
      assertThat(w.chatMessages(turns.get(0)).get(0).role()).isEqualTo("system");
    }
  }

  @Test
  void ragDrawsPopularDocumentsMoreOftenAndSharingZeroRemovesThem() {
    Workload w = WorkloadCatalog.create("rag:count=2000,documents=20,zipf=1.2");
    Map<String, Long> counts = w.requests().stream()
        .collect(Collectors.groupingBy(WorkloadRequest::sessionId, Collectors.counting()));
    assertThat(counts.get("doc-0")).isGreaterThan(counts.getOrDefault("doc-19", 0L) * 5);
    Workload none = WorkloadCatalog.create("rag:count=50,sharing=0");
    assertThat(none.requests()).allMatch(r -> r.sessionId().startsWith("unique-"));
    Workload half = WorkloadCatalog.create("rag:count=2000,sharing=0.5");
    long shared = half.requests().stream().filter(r -> r.sessionId().startsWith("doc-")).count();
    assertThat(shared).isBetween(900L, 1100L);
  }

  @Test
  void bestOfNSendsIdenticalSiblingsAtTheSameInstant() {
    Workload w = WorkloadCatalog.create("best-of-n:groups=10,n=3");
    Map<String, List<WorkloadRequest>> groups =
        w.requests().stream().collect(Collectors.groupingBy(WorkloadRequest::sessionId));
    assertThat(groups).hasSize(10);
    for (List<WorkloadRequest> g : groups.values()) {
      assertThat(g).hasSize(3);
      Set<Long> arrivals = new HashSet<>();
      g.forEach(r -> arrivals.add(r.arrivalMicros()));
      assertThat(arrivals).hasSize(1);
      assertThat(w.promptTokens(g.get(1))).isEqualTo(w.promptTokens(g.get(0)));
      assertThat(w.promptTokens(g.get(2))).isEqualTo(w.promptTokens(g.get(0)));
    }
  }

  @Test
  void aHeadOfBestOfNKeepsWholeGroups() {
    // head(10) of best-of-4 cut by count sent 2 of group 2's 4 siblings: two requests the workload never has alone
    Workload w = WorkloadCatalog.create("best-of-n:groups=5,n=4");
    assertThat(w.head(10).requests()).extracting(WorkloadRequest::sessionId)
        .containsExactly("group-0", "group-0", "group-0", "group-0", "group-1", "group-1", "group-1", "group-1");
    assertThat(w.head(12).size()).isEqualTo(12);
    assertThat(w.head(3).size()).isZero(); // the first group alone is larger: none of it
    // turns of a conversation share a session but not an instant: cut one by one
    assertThat(WorkloadCatalog.create("multi-turn:sessions=3,turns=4,format=tokens").head(5).size()).isEqualTo(5);
  }

  @Test
  void chatWordsAreDistinct() {
    Set<String> words = new HashSet<>();
    for (int i = 0; i < ChatText.vocabularySize(); i++) {
      words.add(ChatText.word(i));
    }
    assertThat(words).hasSize(ChatText.vocabularySize());
    assertThat(ChatText.vocabularySize()).isGreaterThan(200);
  }

  @Test
  void tokensStayInTheConfiguredRange() {
    Workload w = WorkloadCatalog.create("unique:count=20,vocab=5000..5010");
    for (WorkloadRequest r : w.requests()) {
      for (int t : w.promptTokens(r)) {
        if (t < 5000 || t >= 5010) {
          throw new AssertionError("token " + t + " outside [5000, 5010)");
        }
      }
    }
  }

  @Test
  void catalogRejectsUnknownNamesAndOptions() {
    assertThatThrownBy(() -> WorkloadCatalog.create("nope")).hasMessageContaining("unknown workload nope");
    assertThatThrownBy(() -> WorkloadCatalog.create("rag:documnets=3")).hasMessageContaining("documnets")
        .hasMessageContaining("documents");
    assertThatThrownBy(() -> WorkloadCatalog.create("rag:count")).hasMessageContaining("key=value");
    assertThatThrownBy(() -> WorkloadCatalog.create("rag:count=x")).hasMessageContaining("not a number");
    assertThatThrownBy(() -> WorkloadCatalog.create("system-prompt:sharing=1.5")).hasMessageContaining("sharing");
  }

  @Test
  void sweepsExpandIntoOneSpecPerValue() {
    assertThat(WorkloadCatalog.expand("system-prompt:count=10,sharing=0|0.5|0.9"))
        .containsExactly("system-prompt:count=10,sharing=0", "system-prompt:count=10,sharing=0.5",
            "system-prompt:count=10,sharing=0.9");
    assertThat(WorkloadCatalog.expand("rag")).containsExactly("rag");
    assertThat(WorkloadCatalog.create("system-prompt:count=10,sharing=0.5").params())
        .containsEntry("sharing", 0.5).containsEntry("count", 10).containsEntry("prefixes", 8)
        .containsEntry("format", "chat");
  }
}
