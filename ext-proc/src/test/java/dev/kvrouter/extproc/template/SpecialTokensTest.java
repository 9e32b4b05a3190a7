package dev.kvrouter.extproc.template;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** special_tokens_map derivation from tokenizer_config.json (transformers 5.x rules). */
class SpecialTokensTest {
  private static SpecialTokens parse(String json) throws Exception {
    return SpecialTokens.fromTokenizerConfig(new ObjectMapper().readTree(json));
  }

  @Test
  void addedTokenObjectsAndExplicitNulls() throws Exception {
    var t = parse("{\"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<s>\"}, \"eos_token\": \"</s>\","
        + " \"unk_token\": null, \"tokenizer_class\": \"LlamaTokenizer\"}");
    assertThat(t.tokens()).isEqualTo(Map.of("bos_token", "<s>", "eos_token", "</s>"));
  }

  @Test
  void classDefaultsFillOnlyMissingKeys() throws Exception {
    var t = parse("{\"tokenizer_class\": \"GemmaTokenizer\", \"eos_token\": \"<end_of_turn>\"}");
    assertThat(t.tokens()).containsEntry("eos_token", "<end_of_turn>").containsEntry("bos_token", "<bos>")
        .containsEntry("mask_token", "<mask>");
  }

  /** Checked against transformers 5.24 with a copy of the qwen3 config carrying these keys. */
  @Test
  void namedExtraTokensAndOtherTokenKeysBecomeVariables() throws Exception {
    var t = parse("{\"extra_special_tokens\": {\"image_token\": \"<img>\"}, \"boi_token\": \"<boi>\","
        + " \"additional_special_tokens\": [\"<x>\"], \"not_a_token\": \"y\", \"tokenizer_suffix\": \"z\","
        + " \"model_max_length\": 8}");
    assertThat(t.tokens()).isEqualTo(Map.of("image_token", "<img>", "boi_token", "<boi>", "not_a_token", "y"));
  }
}
