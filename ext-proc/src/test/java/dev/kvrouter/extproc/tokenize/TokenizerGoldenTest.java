package dev.kvrouter.extproc.tokenize;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.tokenize.GoldenFixtures.Case;
import dev.kvrouter.extproc.tokenize.TokenizerOptions.Implementation;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Every golden case of every tokenizer, for the pure-Java implementation and the DJL wrapper (segmented and
 * unsegmented): token ids equal to Python transformers, with add_special_tokens false and true.
 */
class TokenizerGoldenTest {

  @TestFactory
  Stream<DynamicNode> goldenIds() {
    List<DynamicNode> models = new ArrayList<>();
    for (String model : GoldenFixtures.MODELS) {
      List<DynamicNode> impls = new ArrayList<>();
      impls.add(DynamicTest.dynamicTest("fixtures were generated from this tokenizer.json", () ->
          assertThat(GoldenFixtures.fileSha256(GoldenFixtures.tokenizerDir(model).resolve("tokenizer.json")))
              .as("re-run scripts/fixtures/tokenizer_goldens.py if the tokenizer files changed")
              .isEqualTo(GoldenFixtures.meta(model).tokenizerJsonSha256())));
      for (Implementation impl : List.of(Implementation.PURE_JAVA, Implementation.DJL, Implementation.DJL_UNSEGMENTED)) {
        Map<String, List<Case>> byCategory = new LinkedHashMap<>();
        for (Case c : GoldenFixtures.cases(model)) {
          byCategory.computeIfAbsent(c.id().substring(0, c.id().indexOf('/')), k -> new ArrayList<>()).add(c);
        }
        List<DynamicNode> tests = new ArrayList<>();
        byCategory.forEach((category, cases) -> tests.add(DynamicTest.dynamicTest(category + " (" + cases.size() + ")",
            () -> check(GoldenFixtures.tokenizer(model, impl), cases))));
        impls.add(DynamicContainer.dynamicContainer(impl.name(), tests));
      }
      models.add(DynamicContainer.dynamicContainer(model, impls));
    }
    return models.stream();
  }

  static void check(Tokenizer tokenizer, List<Case> cases) {
    List<String> failures = new ArrayList<>();
    for (Case c : cases) {
      for (boolean special : new boolean[] {false, true}) {
        int[] actual = tokenizer.encode(c.text(), special);
        String problem;
        if (c.full()) {
          problem = GoldenFixtures.firstDifference(special ? c.idsSpecial() : c.ids(), actual);
        } else {
          problem = longCaseProblem(c, actual, special);
        }
        if (problem != null) {
          String shown = c.text().length() <= 200 ? " text=\"" + GoldenFixtures.preview(c.text()) + "\"" : "";
          failures.add(c.id() + " add_special_tokens=" + special + ": " + problem + shown);
        }
      }
    }
    assertThat(failures).as(tokenizer.name() + " " + tokenizer.implementation()).isEmpty();
  }

  private static String longCaseProblem(Case c, int[] actual, boolean special) {
    int expectedCount = special ? c.countSpecial() : c.count();
    String expectedSha = special ? c.sha256Special() : c.sha256();
    if (!special) {
      int[] head = java.util.Arrays.copyOf(actual, Math.min(actual.length, c.head().length));
      String d = GoldenFixtures.firstDifference(c.head(), head);
      if (d != null) {
        return "in the first " + c.head().length + " tokens: " + d;
      }
    }
    if (actual.length != expectedCount) {
      return "expected " + expectedCount + " tokens, got " + actual.length;
    }
    if (!special) {
      int[] tail = java.util.Arrays.copyOfRange(actual, actual.length - c.tail().length, actual.length);
      String d = GoldenFixtures.firstDifference(c.tail(), tail);
      if (d != null) {
        return "in the last " + c.tail().length + " tokens: " + d;
      }
    }
    if (!GoldenFixtures.sha256(actual).equals(expectedSha)) {
      return "same length and ends, but the ids differ in the middle (sha256 mismatch)";
    }
    return null;
  }
}
