package dev.kvrouter.extproc.template;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The special-token variables a chat template sees ({@code bos_token}, {@code eos_token}, ...):
 * transformers 5.x's {@code tokenizer.special_tokens_map}, which {@code apply_chat_template}
 * passes under the caller's kwargs.
 *
 * <p>Derived from tokenizer_config.json the way {@code PreTrainedTokenizerBase.__init__} does:
 * the seven named attributes ({@code bos, eos, unk, sep, pad, cls, mask}), model-specific named
 * tokens (an {@code extra_special_tokens} mapping and any other {@code *_token} string), with
 * {@code AddedToken} objects reduced to their content and explicit nulls kept null. Tokenizer
 * classes that default missing attributes in their constructor (Gemma, Qwen2, Llama) get those
 * defaults. List-valued {@code extra_special_tokens} are not template variables in v5.
 */
public record SpecialTokens(Map<String, String> tokens) {
  private static final List<String> NAMED = List.of("bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
      "cls_token", "mask_token");

  /** Constructor defaults of tokenizer classes, applied only when the config lacks the key. */
  private static final Map<String, Map<String, String>> CLASS_DEFAULTS = Map.of(
      "GemmaTokenizer", Map.of("unk_token", "<unk>", "bos_token", "<bos>", "eos_token", "<eos>", "pad_token", "<pad>",
          "mask_token", "<mask>"),
      "GemmaTokenizerFast", Map.of("unk_token", "<unk>", "bos_token", "<bos>", "eos_token", "<eos>", "pad_token",
          "<pad>", "mask_token", "<mask>"),
      "Qwen2Tokenizer", Map.of("unk_token", "<|endoftext|>", "eos_token", "<|endoftext|>", "pad_token", "<|endoftext|>"),
      "Qwen2TokenizerFast", Map.of("unk_token", "<|endoftext|>", "eos_token", "<|endoftext|>", "pad_token",
          "<|endoftext|>"),
      "LlamaTokenizer", Map.of("unk_token", "<unk>", "bos_token", "<s>", "eos_token", "</s>"));

  public SpecialTokens {
    tokens = Collections.unmodifiableMap(new LinkedHashMap<>(tokens));
  }

  public static SpecialTokens none() {
    return new SpecialTokens(Map.of());
  }

  /** Reads the special tokens from a parsed tokenizer_config.json. */
  public static SpecialTokens fromTokenizerConfig(JsonNode config) {
    Map<String, String> named = new LinkedHashMap<>();
    Map<String, String> modelSpecific = new LinkedHashMap<>();
    Map<String, String> auto = new LinkedHashMap<>();
    for (var e : config.properties()) {
      String key = e.getKey();
      JsonNode v = e.getValue();
      if (NAMED.contains(key)) {
        String s = tokenText(v);
        if (s != null) {
          named.put(key, s);
        }
      } else if (key.equals("extra_special_tokens") && v.isObject()) {
        v.properties().forEach(x -> {
          String s = tokenText(x.getValue());
          if (s != null) {
            modelSpecific.put(x.getKey(), s);
          }
        });
      } else if (key.endsWith("_token") && tokenText(v) != null) {
        auto.put(key, tokenText(v));
      }
    }
    Map<String, String> defaults = CLASS_DEFAULTS.getOrDefault(config.path("tokenizer_class").asText(""), Map.of());
    Map<String, String> out = new LinkedHashMap<>();
    for (String k : NAMED) {
      if (named.containsKey(k)) {
        out.put(k, named.get(k));
      } else if (!config.has(k) && defaults.containsKey(k)) {
        out.put(k, defaults.get(k));
      }
    }
    out.putAll(modelSpecific);
    out.putAll(auto);
    return new SpecialTokens(out);
  }

  private static String tokenText(JsonNode v) {
    if (v == null || v.isNull()) {
      return null;
    }
    if (v.isTextual()) {
      return v.asText();
    }
    if (v.isObject() && v.has("content") && v.get("content").isTextual()) {
      return v.get("content").asText();
    }
    return null;
  }
}
