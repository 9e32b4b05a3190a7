package dev.kvrouter.examples.workload;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A scripted chat answer as the model emits it: the encoder's tokens of the answer text, then the end-of-turn
 * token; a cut answer keeps the words whose tokens all arrived. The encoder here is a stand-in that makes the first
 * word two tokens (as real tokenizers do for some words without a leading space) and every later word one.
 */
class ChatAnswersTest {

  private static final int EOT = 7;

  /** One token per space-separated word, the first word two. */
  private static int[] encode(String text) {
    List<Integer> ids = new ArrayList<>();
    String[] words = text.isEmpty() ? new String[0] : text.split(" ");
    for (int i = 0; i < words.length; i++) {
      int h = Math.floorMod(words[i].hashCode(), 1000) + 100;
      ids.add(h);
      if (i == 0) {
        ids.add(h + 1);
      }
    }
    return ids.stream().mapToInt(Integer::intValue).toArray();
  }

  private final ChatAnswers answers = new ChatAnswers(TokenSpace.DEFAULT, ChatAnswersTest::encode, EOT);

  @Test
  void theModelEmitsTheTextTokensThenTheEndOfTurn() {
    Segment answer = new Segment(42, 12);
    String text = answers.text(answer);
    assertThat(text.split(" ")).hasSize(12);
    assertThat(text).isEqualTo(ChatText.render(List.of(answer), TokenSpace.DEFAULT));
    int[] t = answers.tokens(answer);
    assertThat(t).hasSize(12 + 1 + 1);
    assertThat(t[t.length - 1]).isEqualTo(EOT);
    assertThat(java.util.Arrays.copyOf(t, t.length - 1)).containsExactly(encode(text));
  }

  @Test
  void aCutAnswerKeepsTheWordsWhoseTokensArrived() {
    Segment answer = new Segment(42, 12);
    assertThat(answers.wordsReceived(answer, 0)).isZero();
    assertThat(answers.wordsReceived(answer, 1)).as("half of the two-token first word").isZero();
    assertThat(answers.wordsReceived(answer, 2)).isEqualTo(1);
    assertThat(answers.wordsReceived(answer, 5)).isEqualTo(4);
    assertThat(answers.wordsReceived(answer, 13)).isEqualTo(12);
    // the shorter segment renders as the text's prefix, which is what the client holds
    assertThat(answers.text(answer)).startsWith(answers.text(new Segment(42, 4)) + " ");
  }

  @Test
  void eachGeneratedTokenStreamsTheWordsItCompletes() {
    Segment answer = new Segment(42, 12);
    String[] d = answers.deltas(answer);
    int[] t = answers.tokens(answer);
    assertThat(d).hasSameSizeAs(t);
    assertThat(String.join("", d)).isEqualTo(answers.text(answer));
    String[] words = answers.text(answer).split(" ");
    assertThat(d[0]).as("the first word takes two tokens").isEmpty();
    assertThat(d[1]).isEqualTo(words[0]);
    assertThat(d[2]).isEqualTo(" " + words[1]);
    assertThat(d[t.length - 1]).as("the end of turn is not text").isEmpty();
    // what the client holds after t tokens is what a cut answer keeps
    for (int n = 0; n <= t.length; n++) {
      String held = String.join("", java.util.Arrays.copyOf(d, n));
      int expected = n >= t.length - 1 ? 12 : answers.wordsReceived(answer, n);
      assertThat(ChatText.wordsHeld(held, answer, TokenSpace.DEFAULT)).as("after %d tokens", n).isEqualTo(expected);
    }
  }

  @Test
  void theWordsHeldOfAReceivedTextCountOnlyWholeWordsOfTheScript() {
    Segment answer = new Segment(42, 3);
    String text = answers.text(answer);
    String[] w = text.split(" ");
    assertThat(ChatText.wordsHeld("", answer, TokenSpace.DEFAULT)).isZero();
    assertThat(ChatText.wordsHeld(w[0], answer, TokenSpace.DEFAULT)).isEqualTo(1);
    assertThat(ChatText.wordsHeld(w[0] + " ", answer, TokenSpace.DEFAULT)).isEqualTo(1);
    assertThat(ChatText.wordsHeld(w[0] + " " + w[1].charAt(0), answer, TokenSpace.DEFAULT)).as("a cut word")
        .isEqualTo(1);
    assertThat(ChatText.wordsHeld(text, answer, TokenSpace.DEFAULT)).isEqualTo(3);
    assertThat(ChatText.wordsHeld(text + " more", answer, TokenSpace.DEFAULT)).as("not the script").isEqualTo(-1);
    assertThat(ChatText.wordsHeld("zzz", answer, TokenSpace.DEFAULT)).isEqualTo(-1);
  }
}
