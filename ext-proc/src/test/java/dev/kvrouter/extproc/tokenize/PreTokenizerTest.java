package dev.kvrouter.extproc.tokenize;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Split semantics for literal patterns. Expected pieces are from tokenizers 0.23.3:
 * {@code pre_tokenizers.Split(" ", behavior).pre_tokenize_str(text)}.
 */
class PreTokenizerTest {

  private static List<String> pieces(PreTokenizer.Behavior behavior, String text) {
    PreTokenizer p = new PreTokenizer(List.of(new PreTokenizer.Step(SplitPattern.literal(" "), behavior)), false);
    IntList ends = new IntList(8);
    p.split(text, 0, text.length(), ends);
    List<String> out = new ArrayList<>();
    int start = 0;
    for (int i = 0; i < ends.size(); i++) {
      out.add(text.substring(start, ends.get(i)));
      start = ends.get(i);
    }
    return out;
  }

  @Test
  void mergedWithPrevious_joinsDelimiterToPrecedingText_orLeavesItAlone() {
    PreTokenizer.Behavior m = PreTokenizer.Behavior.MERGED_WITH_PREVIOUS;
    assertThat(pieces(m, "a b")).containsExactly("a ", "b");
    assertThat(pieces(m, "a  b")).containsExactly("a ", " ", "b");
    assertThat(pieces(m, " a")).containsExactly(" ", "a");
    assertThat(pieces(m, "  a ")).containsExactly(" ", " ", "a ");
    assertThat(pieces(m, "ab")).containsExactly("ab");
    assertThat(pieces(m, "   ")).containsExactly(" ", " ", " ");
    assertThat(pieces(m, "a b  c   ")).containsExactly("a ", "b ", " ", "c ", " ", " ");
  }

  @Test
  void isolated_makesEveryDelimiterItsOwnPiece() {
    PreTokenizer.Behavior i = PreTokenizer.Behavior.ISOLATED;
    assertThat(pieces(i, "a b")).containsExactly("a", " ", "b");
    assertThat(pieces(i, "a  b")).containsExactly("a", " ", " ", "b");
    assertThat(pieces(i, " a")).containsExactly(" ", "a");
  }

  @Test
  void emptyRange_hasNoPieces() {
    assertThat(pieces(PreTokenizer.Behavior.ISOLATED, "")).isEmpty();
  }
}
