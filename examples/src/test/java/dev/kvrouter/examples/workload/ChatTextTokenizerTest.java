package dev.kvrouter.examples.workload;

import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import java.nio.file.Path;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The promise chat workloads rest on, checked with the real tokenizers (fetched by scripts/fetch-tokenizers.sh):
 * every word is one token after a space, so a segment of n ids is n tokens of chat text.
 */
class ChatTextTokenizerTest {

  @ParameterizedTest
  @ValueSource(strings = {"qwen3", "llama3_1"})
  void everyWordIsOneTokenAfterASpace(String model) throws Exception {
    Path file = Path.of(System.getProperty("kvrouter.root", ".")).resolve(".cache/tokenizers").resolve(model)
        .resolve("tokenizer.json");
    assertThat(file).as("tokenizer %s missing: run scripts/fetch-tokenizers.sh", model).isRegularFile();
    try (HuggingFaceTokenizer t = HuggingFaceTokenizer.builder().optTokenizerPath(file).optAddSpecialTokens(false)
        .optTruncation(false).optPadding(false).build()) {
      for (int i = 0; i < ChatText.vocabularySize(); i++) {
        String w = ChatText.word(i);
        assertThat(t.encode(" " + w, false, false).getIds()).as("\" %s\" in %s", w, model).hasSize(1);
      }
      Workload chat = WorkloadCatalog.create("system-prompt:count=3,prompt=300,sharing=0.5");
      String text = chat.chatMessages(chat.requests().get(0)).get(0).content();
      assertThat(t.encode(text, false, false).getIds()).hasSize(150);
    }
  }
}
