package dev.kvrouter.extproc.tokenize;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Leftmost-longest matching, and the indexOf-driven scanner agreeing with the plain scan. */
class AddedTokenMatcherTest {

  private static AddedTokenMatcher matcher(String... tokens) {
    Map<String, Integer> m = new LinkedHashMap<>();
    for (int i = 0; i < tokens.length; i++) {
      m.put(tokens[i], 100 + i);
    }
    return new AddedTokenMatcher(m);
  }

  private static List<String> matches(AddedTokenMatcher m, String text) {
    List<String> out = new ArrayList<>();
    int pos = 0;
    while (true) {
      long x = m.find(text, pos, text.length());
      if (x == AddedTokenMatcher.NONE) {
        return out;
      }
      out.add(AddedTokenMatcher.start(x) + ":" + text.substring(AddedTokenMatcher.start(x), m.end(x)));
      pos = m.end(x);
    }
  }

  @Test
  void leftmostStartWins_thenTheLongestThere() {
    AddedTokenMatcher m = matcher("\n", "\n\n", "ab", "abc", "bcd");
    assertThat(matches(m, "xabcd")).containsExactly("1:abc");
    assertThat(matches(m, "xbcd")).containsExactly("1:bcd");
    assertThat(matches(m, "\n\n\n")).containsExactly("0:\n\n", "2:\n");
    assertThat(matches(m, "a")).isEmpty();
  }

  @Test
  void scanner_findsWhatThePlainScanFinds() {
    AddedTokenMatcher m = matcher("<bos>", "<eos>", "\n", "\n\n", "\n\n\n", "\t", "\u2581\u2581", "[multimodal]", "<b>");
    String[] parts = {"<", "b", "o", "s", ">", "<bos>", "<eos>", "\n", "\t", "\u2581", "[", "multimodal]", "x", " "};
    Random rnd = new Random(3);
    for (int t = 0; t < 2000; t++) {
      StringBuilder sb = new StringBuilder();
      int n = rnd.nextInt(40);
      for (int i = 0; i < n; i++) {
        sb.append(parts[rnd.nextInt(parts.length)]);
      }
      String text = sb.toString();
      AddedTokenMatcher.Scanner scanner = m.new Scanner(text);
      int pos = 0;
      while (true) {
        long expected = m.find(text, pos, text.length());
        long actual = scanner.find(pos);
        assertThat(actual).as("text %d at %d", t, pos).isEqualTo(expected);
        if (expected == AddedTokenMatcher.NONE) {
          break;
        }
        pos = m.end(expected);
      }
    }
  }
}
