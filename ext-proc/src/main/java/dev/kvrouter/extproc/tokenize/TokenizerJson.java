package dev.kvrouter.extproc.tokenize;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.NullNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * The parts of a tokenizer.json the loader needs, read with Jackson's streaming parser so the 10-30 MB
 * vocabulary and merge lists never become a tree. Small sections (normalizer, pre-tokenizer, ...) stay as
 * {@link JsonNode}s for the support checks.
 */
record TokenizerJson(
    List<AddedToken> addedTokens,
    JsonNode normalizer,
    JsonNode preTokenizer,
    JsonNode postProcessor,
    JsonNode truncation,
    JsonNode padding,
    JsonNode modelOptions,
    String[] vocabTokens,
    int[] vocabIds,
    StringIntMap vocab,
    int[] merges,
    int firstUnresolvedMerge) {

  /** An entry of {@code added_tokens}. */
  record AddedToken(int id, String content, boolean special, boolean normalized, boolean lstrip, boolean rstrip,
      boolean singleWord) {}

  private static final ObjectMapper MAPPER = new ObjectMapper();
  // The vocabulary is an object with 100k+ distinct keys: canonicalizing and interning them would cost more
  // than the rest of the parse.
  private static final JsonFactory FACTORY = JsonFactory.builder()
      .streamReadConstraints(StreamReadConstraints.builder().maxStringLength(Integer.MAX_VALUE).build())
      .disable(JsonFactory.Feature.CANONICALIZE_FIELD_NAMES)
      .disable(JsonFactory.Feature.INTERN_FIELD_NAMES)
      .build();

  /**
   * Number of merges; {@link #merges} holds the ids of merge i's left token, right token and merged token at
   * 3i, 3i + 1 and 3i + 2 (-1 where a token is not in the vocabulary; {@link #firstUnresolvedMerge} is the
   * first such merge, or -1).
   */
  int mergeCount() {
    return merges.length / 3;
  }

  static TokenizerJson parse(byte[] json) throws IOException {
    List<AddedToken> added = new ArrayList<>();
    JsonNode normalizer = NullNode.getInstance();
    JsonNode preTokenizer = NullNode.getInstance();
    JsonNode postProcessor = NullNode.getInstance();
    JsonNode truncation = NullNode.getInstance();
    JsonNode padding = NullNode.getInstance();
    com.fasterxml.jackson.databind.node.ObjectNode modelOptions = MAPPER.createObjectNode();
    List<String> vocabTokens = new ArrayList<>();
    IntList vocabIds = new IntList(1 << 16);
    List<String> mergeStrings = new ArrayList<>();
    IntList merges = new IntList(1 << 16);
    try (JsonParser p = FACTORY.createParser(json)) {
      p.setCodec(MAPPER);
      expect(p.nextToken(), JsonToken.START_OBJECT, "tokenizer.json root");
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String field = p.currentName();
        JsonToken t = p.nextToken();
        switch (field) {
          case "added_tokens" -> {
            JsonNode arr = p.readValueAsTree();
            for (JsonNode a : arr) {
              added.add(new AddedToken(a.path("id").asInt(), a.path("content").asText(), a.path("special").asBoolean(),
                  a.path("normalized").asBoolean(), a.path("lstrip").asBoolean(), a.path("rstrip").asBoolean(),
                  a.path("single_word").asBoolean()));
            }
          }
          case "normalizer" -> normalizer = tree(p);
          case "pre_tokenizer" -> preTokenizer = tree(p);
          case "post_processor" -> postProcessor = tree(p);
          case "truncation" -> truncation = tree(p);
          case "padding" -> padding = tree(p);
          case "model" -> {
            expect(t, JsonToken.START_OBJECT, "model");
            while (p.nextToken() == JsonToken.FIELD_NAME) {
              String mf = p.currentName();
              JsonToken mt = p.nextToken();
              if (mf.equals("vocab") && mt == JsonToken.START_OBJECT) {
                while (p.nextToken() == JsonToken.FIELD_NAME) {
                  vocabTokens.add(p.currentName());
                  p.nextToken();
                  vocabIds.add(p.getIntValue());
                }
              } else if (mf.equals("merges") && mt == JsonToken.START_ARRAY) {
                readMergeStrings(p, mergeStrings);
              } else {
                modelOptions.set(mf, tree(p));
              }
            }
          }
          default -> p.skipChildren();
        }
      }
    }
    String[] tokens = vocabTokens.toArray(new String[0]);
    int[] ids = vocabIds.toArray();
    StringIntMap vocab = StringIntMap.of(tokens, ids);
    for (int i = 0; i < mergeStrings.size(); i += 2) {
      String a = mergeStrings.get(i);
      String b = mergeStrings.get(i + 1);
      merges.add(vocab.get(a));
      merges.add(vocab.get(b));
      merges.add(vocab.getConcat(a, b));
    }
    int[] m = merges.toArray();
    int firstUnresolved = -1;
    for (int i = 0; i < m.length; i++) {
      if (m[i] < 0) {
        firstUnresolved = i / 3;
        break;
      }
    }
    return new TokenizerJson(List.copyOf(added), normalizer, preTokenizer, postProcessor, truncation, padding,
        modelOptions, tokens, ids, vocab, m, firstUnresolved);
  }

  /** Merges are either {@code "a b"} strings (older files) or {@code ["a", "b"]} pairs. */
  private static void readMergeStrings(JsonParser p, List<String> out) throws IOException {
    JsonToken t;
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      if (t == JsonToken.VALUE_STRING) {
        String s = p.getText();
        int sp = s.indexOf(' ');
        if (sp < 0 || s.indexOf(' ', sp + 1) >= 0) {
          throw new IOException("merge is not two space-separated tokens (entry " + out.size() / 2 + ")");
        }
        out.add(s.substring(0, sp));
        out.add(s.substring(sp + 1));
      } else if (t == JsonToken.START_ARRAY) {
        expect(p.nextToken(), JsonToken.VALUE_STRING, "merge pair");
        out.add(p.getText());
        expect(p.nextToken(), JsonToken.VALUE_STRING, "merge pair");
        out.add(p.getText());
        expect(p.nextToken(), JsonToken.END_ARRAY, "merge pair of two");
      } else {
        throw new IOException("unexpected " + t + " in merges");
      }
    }
  }

  private static JsonNode tree(JsonParser p) throws IOException {
    if (p.currentToken() == JsonToken.VALUE_NULL) {
      return NullNode.getInstance();
    }
    return p.readValueAsTree();
  }

  private static void expect(JsonToken actual, JsonToken expected, String what) throws IOException {
    if (actual != expected) {
      throw new IOException("tokenizer.json: expected " + expected + " at " + what + ", found " + actual);
    }
  }
}
