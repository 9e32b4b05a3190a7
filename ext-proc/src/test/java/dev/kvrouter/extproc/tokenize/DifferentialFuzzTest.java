package dev.kvrouter.extproc.tokenize;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.tokenize.TokenizerOptions.Implementation;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Pure Java against DJL (the Rust tokenizers library) on seeded random strings: fragments that stress the
 * splitters, this tokenizer's own added tokens, and random code points (limited to those Java 17 knows, as
 * DJL bundles an older tokenizers release than the golden fixtures).
 */
class DifferentialFuzzTest {
  private static final String[] FRAGMENTS = {
    "a", "word", " word", "Word", "WORD", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", "0", "12",
    "345", "6789", ".", ",", "!", "?", "...", "--", "()", "\"", "'", "'s", "'S", "'ll", "'LL", "'re", "'ve", "'m", "'d",
    "'t", "\u017f", "日本", "語", "中文", "ひらがな", "カタカナ", "한국", "😀", "👍🏽", "e\u0301", "\u0301", "\u200b",
    "\u200d", "\ufeff", "\u00a0", "\u3000", "\u0085", "\u0000", "\u001c", "\u2028", "مرحبا", "½", "①", "𝐀", "\u2581",
    "\u2581\u2581", "<", ">", "|", "<|", "|>", "<\uff5c", "\uff5c>", "_", "é", "ñ", "ß", "İ", "\u212a", "١٢٣",
    "\u1abf", "\u0898", "\u0316", "\u0323", "\u0344",
  };

  private static String randomText(Random rnd, List<String> added) {
    StringBuilder sb = new StringBuilder();
    int parts = 1 + rnd.nextInt(30);
    for (int i = 0; i < parts; i++) {
      int kind = rnd.nextInt(10);
      if (kind < 6) {
        sb.append(FRAGMENTS[rnd.nextInt(FRAGMENTS.length)]);
      } else if (kind < 8) {
        sb.append(added.get(rnd.nextInt(added.size())));
      } else {
        int cp;
        do {
          cp = rnd.nextBoolean() ? rnd.nextInt(0x3000) : rnd.nextInt(0x30000);
        } while (Character.getType(cp) == Character.UNASSIGNED || Character.getType(cp) == Character.SURROGATE);
        sb.appendCodePoint(cp);
      }
    }
    return sb.toString();
  }

  @ParameterizedTest
  @ValueSource(strings = {"qwen3", "llama3_1", "deepseek_v3", "gemma3"})
  void pureJavaEqualsDjl_onRandomText(String model) throws Exception {
    Tokenizer pure = GoldenFixtures.tokenizer(model, Implementation.PURE_JAVA);
    Tokenizer djl = GoldenFixtures.tokenizer(model, Implementation.DJL_UNSEGMENTED);
    TokenizerJson json = TokenizerJson.parse(
        java.nio.file.Files.readAllBytes(GoldenFixtures.tokenizerDir(model).resolve("tokenizer.json")));
    List<String> added = new ArrayList<>();
    json.addedTokens().stream().limit(40).forEach(a -> added.add(a.content()));
    Random rnd = new Random(20240611L + model.hashCode());
    List<String> failures = new ArrayList<>();
    for (int i = 0; i < 400 && failures.size() < 5; i++) {
      String text = randomText(rnd, added);
      for (boolean special : new boolean[] {false, true}) {
        String d = GoldenFixtures.firstDifference(djl.encode(text, special), pure.encode(text, special));
        if (d != null) {
          failures.add("case " + i + " add_special_tokens=" + special + ": " + d + " text=\"" + GoldenFixtures.preview(text) + "\"");
        }
      }
    }
    assertThat(failures).isEmpty();
  }
}
