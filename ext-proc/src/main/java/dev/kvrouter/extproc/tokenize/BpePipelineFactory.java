package dev.kvrouter.extproc.tokenize;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Builds the pure-Java pipeline from a parsed tokenizer.json, or explains every feature it does not
 * reproduce exactly. The supported set is what Qwen 3, Llama 3.1, DeepSeek V3 and Gemma 3 use: NFC / literal
 * Replace normalizers, Split (known regexes, literal strings) + ByteLevel pre-tokenizers, BPE with merge
 * ranks, {@code ignore_merges} and byte fallback, TemplateProcessing post-processors, and added tokens
 * without {@code lstrip}/{@code rstrip}/{@code single_word}.
 */
final class BpePipelineFactory {

  /** The added tokens split out before normalization, and those matched after it. */
  record AddedTokens(AddedTokenMatcher raw, Map<String, Integer> normalized) {}

  private BpePipelineFactory() {}

  /**
   * The matcher of added tokens that are extracted from the raw text, if tokenizers' extraction can be
   * reproduced exactly (no token with lstrip, rstrip or single_word among them); reasons otherwise.
   */
  static AddedTokens addedTokens(TokenizerJson json, StringIntMap modelVocab, List<String> unsupported) {
    int vocabSize = modelVocab.size();
    int maxAdded = -1;
    Map<String, Integer> raw = new LinkedHashMap<>();
    Map<String, Integer> normalized = new LinkedHashMap<>();
    for (TokenizerJson.AddedToken t : json.addedTokens()) {
      if (t.lstrip() || t.rstrip() || t.singleWord()) {
        unsupported.add("added token flags lstrip/rstrip/single_word (token id " + t.id() + ")");
        return null;
      }
      if (t.content().isEmpty()) {
        unsupported.add("empty added token (id " + t.id() + ")");
        return null;
      }
      if (raw.containsKey(t.content()) || normalized.containsKey(t.content())) {
        unsupported.add("duplicate added token content (id " + t.id() + ")");
        return null;
      }
      // tokenizers ignores the id written in the file: a token of the model vocabulary keeps its id, any other
      // gets the next id after the vocabulary (AddedVocabulary::add_tokens). Only files where both agree are
      // reproduced; the others are rare and go to DJL.
      int inVocab = modelVocab.get(t.content());
      int assigned;
      if (inVocab >= 0) {
        assigned = inVocab;
      } else if (maxAdded < 0) {
        assigned = vocabSize;
      } else {
        assigned = maxAdded >= vocabSize || vocabSize == 0 ? maxAdded + 1 : vocabSize;
      }
      if (assigned != t.id()) {
        unsupported.add("added token id " + t.id() + " is not the id tokenizers assigns (" + assigned + ")");
        return null;
      }
      maxAdded = Math.max(maxAdded, assigned);
      (t.normalized() ? normalized : raw).put(t.content(), t.id());
    }
    return new AddedTokens(new AddedTokenMatcher(raw), normalized);
  }

  /** The pure-Java segment encoder, or null with reasons added to {@code unsupported}. */
  static BpeSegmentEncoder build(TokenizerJson json, StringIntMap vocab, AddedTokens added, int wordCacheSize,
      SegmentEncoder fallback, List<String> unsupported) {
    TextNormalizer normalizer = normalizer(json.normalizer(), unsupported);
    PreTokenizer preTokenizer = preTokenizer(json.preTokenizer(), unsupported);
    BpeModel model = null;
    if (preTokenizer != null) {
      model = model(json, vocab, preTokenizer.byteLevel(), wordCacheSize, unsupported);
    }
    if (normalizer == null || preTokenizer == null || model == null || added == null) {
      return null;
    }
    Map<String, Integer> normalizedTokens = new LinkedHashMap<>();
    for (Map.Entry<String, Integer> e : added.normalized().entrySet()) {
      String content = normalizer.normalize(e.getKey(), 0, e.getKey().length()).toString();
      if (content.isEmpty() || normalizedTokens.putIfAbsent(content, e.getValue()) != null) {
        unsupported.add("normalized added tokens collide after normalization (id " + e.getValue() + ")");
        return null;
      }
    }
    return new BpeSegmentEncoder(normalizer, new AddedTokenMatcher(normalizedTokens), preTokenizer, model, fallback);
  }

  static TextNormalizer normalizer(JsonNode n, List<String> unsupported) {
    if (n == null || n.isNull()) {
      return TextNormalizer.IDENTITY;
    }
    String type = n.path("type").asText();
    switch (type) {
      case "NFC":
        return TextNormalizer.NFC;
      case "Sequence": {
        List<TextNormalizer> steps = new ArrayList<>();
        for (JsonNode step : n.path("normalizers")) {
          TextNormalizer s = normalizer(step, unsupported);
          if (s == null) {
            return null;
          }
          steps.add(s);
        }
        return TextNormalizer.sequence(steps);
      }
      case "Replace": {
        JsonNode pattern = n.path("pattern");
        if (!pattern.has("String") || pattern.path("String").asText().isEmpty()) {
          unsupported.add("normalizer Replace with a regex pattern");
          return null;
        }
        return TextNormalizer.replace(pattern.path("String").asText(), n.path("content").asText());
      }
      default:
        unsupported.add("normalizer type " + type);
        return null;
    }
  }

  static PreTokenizer preTokenizer(JsonNode n, List<String> unsupported) {
    List<JsonNode> steps = new ArrayList<>();
    if (n != null && !n.isNull()) {
      if ("Sequence".equals(n.path("type").asText())) {
        n.path("pretokenizers").forEach(steps::add);
      } else {
        steps.add(n);
      }
    }
    List<PreTokenizer.Step> splits = new ArrayList<>();
    boolean byteLevel = false;
    for (int i = 0; i < steps.size(); i++) {
      JsonNode s = steps.get(i);
      String type = s.path("type").asText();
      if (byteLevel) {
        unsupported.add("pre_tokenizer step after ByteLevel");
        return null;
      }
      if (type.equals("ByteLevel")) {
        if (s.path("add_prefix_space").asBoolean(false) || s.path("use_regex").asBoolean(true)) {
          unsupported.add("pre_tokenizer ByteLevel with add_prefix_space or use_regex");
          return null;
        }
        byteLevel = true;
      } else if (type.equals("Split")) {
        if (s.path("invert").asBoolean(false)) {
          unsupported.add("pre_tokenizer Split with invert");
          return null;
        }
        PreTokenizer.Behavior behavior;
        switch (s.path("behavior").asText()) {
          case "Isolated" -> behavior = PreTokenizer.Behavior.ISOLATED;
          case "MergedWithPrevious" -> behavior = PreTokenizer.Behavior.MERGED_WITH_PREVIOUS;
          default -> {
            unsupported.add("pre_tokenizer Split behavior " + s.path("behavior").asText());
            return null;
          }
        }
        JsonNode pattern = s.path("pattern");
        SplitPattern p;
        if (pattern.has("Regex")) {
          Optional<SplitPattern> known = SplitPattern.forRegex(pattern.path("Regex").asText());
          if (known.isEmpty()) {
            unsupported.add("pre_tokenizer Split regex without a hand-written matcher");
            return null;
          }
          p = known.get();
        } else if (pattern.has("String") && !pattern.path("String").asText().isEmpty()) {
          p = SplitPattern.literal(pattern.path("String").asText());
        } else {
          unsupported.add("pre_tokenizer Split pattern");
          return null;
        }
        splits.add(new PreTokenizer.Step(p, behavior));
      } else {
        unsupported.add("pre_tokenizer type " + type);
        return null;
      }
    }
    return new PreTokenizer(splits, byteLevel);
  }

  static BpeModel model(TokenizerJson json, StringIntMap vocab, boolean byteLevel, int wordCacheSize,
      List<String> unsupported) {
    JsonNode m = json.modelOptions();
    String type = m.path("type").asText("BPE");
    if (!type.equals("BPE")) {
      unsupported.add("model type " + type);
      return null;
    }
    if (!m.path("dropout").isNull() && !m.path("dropout").isMissingNode() && m.path("dropout").asDouble() != 0.0) {
      unsupported.add("BPE dropout");
      return null;
    }
    if (!m.path("continuing_subword_prefix").asText("").isEmpty() || !m.path("end_of_word_suffix").asText("").isEmpty()) {
      unsupported.add("BPE continuing_subword_prefix / end_of_word_suffix");
      return null;
    }
    boolean ignoreMerges = m.path("ignore_merges").asBoolean(false);
    boolean byteFallback = m.path("byte_fallback").asBoolean(false);

    String[] tokens = json.vocabTokens();
    int[] ids = json.vocabIds();
    int maxId = -1;
    for (int id : ids) {
      maxId = Math.max(maxId, id);
    }

    int[] byteToId = null;
    int[] bmpToId = null;
    IntIntMap supplementaryToId = null;
    int[] fallbackIds = null;
    if (byteLevel) {
      byteToId = new int[256];
      char[] alphabet = ByteLevelAlphabet.CHARS;
      for (int b = 0; b < 256; b++) {
        int id = vocab.get(String.valueOf(alphabet[b]));
        if (id < 0) {
          unsupported.add("ByteLevel vocabulary misses byte " + b + " (unknown-token handling not implemented)");
          return null;
        }
        byteToId[b] = id;
      }
    } else {
      if (!byteFallback) {
        unsupported.add("BPE without byte_fallback or ByteLevel (unknown-token handling not implemented)");
        return null;
      }
      fallbackIds = new int[256];
      for (int b = 0; b < 256; b++) {
        int id = vocab.get(String.format("<0x%02X>", b));
        if (id < 0) {
          unsupported.add("byte_fallback vocabulary misses <0x" + Integer.toHexString(b) + ">");
          return null;
        }
        fallbackIds[b] = id;
      }
      bmpToId = new int[0x10000];
      Arrays.fill(bmpToId, -1);
      supplementaryToId = new IntIntMap(64);
      for (int i = 0; i < tokens.length; i++) {
        String t = tokens[i];
        if (t.isEmpty() || t.codePointCount(0, t.length()) != 1) {
          continue;
        }
        int cp = t.codePointAt(0);
        if (cp < 0x10000) {
          bmpToId[cp] = ids[i];
        } else {
          supplementaryToId.put(cp, ids[i]);
        }
      }
    }

    int[] merges = json.merges();
    int count = json.mergeCount();
    if (json.firstUnresolvedMerge() >= 0) {
      unsupported.add("merge " + json.firstUnresolvedMerge() + " refers to a token outside the vocabulary");
      return null;
    }
    MergeTable table = new MergeTable(count);
    boolean[] isFallback = new boolean[maxId + 1];
    if (fallbackIds != null) {
      for (int id : fallbackIds) {
        isFallback[id] = true;
      }
    }
    boolean mergesTouchFallback = false;
    for (int r = 0; r < count; r++) {
      int left = merges[3 * r];
      int right = merges[3 * r + 1];
      table.put(left, right, r, merges[3 * r + 2]);
      mergesTouchFallback |= isFallback[left] || isFallback[right];
    }

    ByteSequenceMap wholeWords = null;
    if (ignoreMerges) {
      byte[][] keys = new byte[tokens.length][];
      for (int i = 0; i < tokens.length; i++) {
        keys[i] = byteLevel ? ByteLevelAlphabet.decode(tokens[i]) : tokens[i].getBytes(java.nio.charset.StandardCharsets.UTF_8);
        if (keys[i] == null) {
          keys[i] = new byte[0]; // not a byte-level string (e.g. an added token): can never equal a word
        }
      }
      wholeWords = new ByteSequenceMap(keys, ids);
    }
    CodePointPairSet pairs = null;
    // If a merge involved a byte-fallback token, a symbol's text would no longer be its token string and
    // cutting words at unmergeable pairs would not be provably exact: keep whole words then.
    if (!byteLevel && !ignoreMerges && !mergesTouchFallback) {
      pairs = new CodePointPairSet(1 << 16);
      for (String t : tokens) {
        int prev = -1;
        for (int i = 0; i < t.length(); ) {
          int cp = t.codePointAt(i);
          if (prev >= 0) {
            pairs.add(prev, cp);
          }
          prev = cp;
          i += Character.charCount(cp);
        }
      }
    }
    WordCache cache = wordCacheSize > 0 ? new WordCache(wordCacheSize) : null;
    return new BpeModel(table, byteToId, bmpToId, supplementaryToId, fallbackIds, wholeWords, pairs, cache);
  }
}
