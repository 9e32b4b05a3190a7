package dev.kvrouter.extproc.tokenize;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import net.openhft.hashing.LongHashFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Loads a model's tokenizer from {@code tokenizer.json} and {@code tokenizer_config.json}, once per model.
 *
 * <p>The pure-Java implementation is used when every feature of the tokenizer.json is one it reproduces
 * exactly (checked here, at load time); otherwise DJL, segmented and cached when the added tokens allow it.
 * Configurations no implementation reproduces the way transformers does (tokens declared only in
 * tokenizer_config.json, {@code split_special_tokens}) are refused with {@link
 * UnsupportedTokenizerException}, so the router falls back to load balancing visibly instead of routing
 * with wrong tokens.
 */
public final class TokenizerLoader {
  private static final Logger log = LoggerFactory.getLogger(TokenizerLoader.class);
  private static final ObjectMapper MAPPER = new ObjectMapper();
  private static final long SEED_PURE_JAVA = 0x70757265L;
  private static final long SEED_DJL = 0x646A6CL;

  private TokenizerLoader() {}

  /**
   * Loads the tokenizer in {@code dir}.
   *
   * @throws NoSuchFileException if {@code dir/tokenizer.json} is missing
   * @throws UnsupportedTokenizerException if no implementation can reproduce the engine's tokenization, or
   *     pure Java was required and is not supported
   */
  public static Tokenizer load(Path dir, TokenizerOptions options) throws IOException, UnsupportedTokenizerException {
    long t0 = System.nanoTime();
    Path tokenizerJson = dir.resolve("tokenizer.json");
    if (!Files.isRegularFile(tokenizerJson)) {
      throw new NoSuchFileException(tokenizerJson.toString(), null, "tokenizer.json not found");
    }
    byte[] bytes = Files.readAllBytes(tokenizerJson);
    Path configPath = dir.resolve("tokenizer_config.json");
    JsonNode config = Files.isRegularFile(configPath) ? MAPPER.readTree(configPath.toFile()) : MAPPER.createObjectNode();
    TokenizerJson json = TokenizerJson.parse(bytes);
    String name = options.name() != null ? options.name() : dir.getFileName().toString();

    StringIntMap vocab = json.vocab();
    List<String> refused = checkAgainstConfig(json, vocab, config);
    if (!refused.isEmpty()) {
      throw new UnsupportedTokenizerException(refused);
    }

    List<String> reasons = new ArrayList<>();
    BpePipelineFactory.AddedTokens added = BpePipelineFactory.addedTokens(json, vocab, reasons);
    PostProcessor post = PostProcessor.parse(json.postProcessor(), reasons);
    if (post != null && options.addBosToken() != null) {
      post = overrideBos(post, options.addBosToken(), json, vocab, config, reasons);
    }

    Tokenizer tokenizer = null;
    TokenizerOptions.Implementation impl = options.implementation();
    if (impl == TokenizerOptions.Implementation.AUTO || impl == TokenizerOptions.Implementation.PURE_JAVA) {
      LazyDjlSegmentEncoder unicodeFallback = new LazyDjlSegmentEncoder(dir);
      BpeSegmentEncoder encoder =
          BpePipelineFactory.build(json, vocab, added, options.wordCacheSize(), unicodeFallback, reasons);
      if (encoder != null && post != null && reasons.isEmpty()) {
        tokenizer = new SegmentedTokenizer(name, "pure-java", LongHashFunction.xx3(SEED_PURE_JAVA).hashBytes(bytes),
            added.raw(), encoder, post, options.segmentCache(), estimator(), unicodeFallback);
      } else if (impl == TokenizerOptions.Implementation.PURE_JAVA) {
        throw new UnsupportedTokenizerException(reasons);
      } else {
        log.info("tokenizer {}: pure-Java implementation not applicable ({}); using DJL", name, String.join("; ", reasons));
      }
    }
    if (tokenizer == null) {
      long fingerprint = LongHashFunction.xx3(SEED_DJL).hashBytes(bytes);
      if (options.addBosToken() != null && post == null) {
        throw new UnsupportedTokenizerException(List.of("addBosToken override with an unsupported post_processor"));
      }
      DjlEngine engine;
      try {
        engine = DjlEngine.load(dir);
      } catch (RuntimeException | LinkageError e) {
        // No native library for this platform, or DJL rejected the file: no exact implementation is left.
        List<String> all = new ArrayList<>(reasons);
        all.add("DJL cannot load this tokenizer: " + e);
        throw new UnsupportedTokenizerException(all);
      }
      if (impl != TokenizerOptions.Implementation.DJL_UNSEGMENTED && added != null && post != null) {
        tokenizer = new SegmentedTokenizer(name, "djl-segmented", fingerprint, added.raw(), new DjlSegmentEncoder(engine),
            post, options.segmentCache(), estimator(), engine);
      } else if (options.addBosToken() != null) {
        engine.close();
        throw new UnsupportedTokenizerException(List.of("addBosToken override needs the segmented implementation"));
      } else {
        tokenizer = new DjlTokenizer(name, fingerprint, engine, estimator(), post);
      }
    }
    calibrate(tokenizer);
    log.info("tokenizer {} loaded: implementation={}, {} MB tokenizer.json, {} ms, {} chars/token",
        name, tokenizer.implementation(), bytes.length >> 20, (System.nanoTime() - t0) / 1_000_000,
        String.format("%.2f", tokenizer.charsPerToken().charsPerToken()));
    return tokenizer;
  }

  private static CharsPerTokenEstimator estimator() {
    return new CharsPerTokenEstimator(CharsPerTokenEstimator.DEFAULT_CHARS_PER_TOKEN, 0.05);
  }

  /** Seeds the estimate with the calibration sample (encoded without the segment cache). */
  private static void calibrate(Tokenizer tokenizer) {
    String sample = CalibrationSample.TEXT;
    int tokens = tokenizer instanceof SegmentedTokenizer s
        ? s.encodeUncached(sample, false).length
        : tokenizer.encode(sample, false).length;
    tokenizer.charsPerToken().seed(sample.length(), tokens);
  }

  /**
   * What transformers would do differently from tokenizer.json alone: tokens it adds from
   * tokenizer_config.json, and {@code split_special_tokens}.
   */
  static List<String> checkAgainstConfig(TokenizerJson json, StringIntMap vocab, JsonNode config) {
    List<String> problems = new ArrayList<>();
    if (config.path("split_special_tokens").asBoolean(false)) {
      problems.add("tokenizer_config.json sets split_special_tokens=true");
    }
    Map<Integer, String> addedById = new HashMap<>();
    Set<String> known = new HashSet<>();
    for (TokenizerJson.AddedToken t : json.addedTokens()) {
      addedById.put(t.id(), t.content());
      known.add(t.content());
    }
    config.path("added_tokens_decoder").fields().forEachRemaining(e -> {
      String content = e.getValue().path("content").asText();
      int id;
      try {
        id = Integer.parseInt(e.getKey());
      } catch (NumberFormatException ex) {
        problems.add("tokenizer_config.json added_tokens_decoder has a non-numeric id");
        return;
      }
      if (!content.equals(addedById.get(id))) {
        problems.add("tokenizer_config.json declares added token id " + id + " that tokenizer.json lacks");
      }
    });
    List<JsonNode> named = new ArrayList<>();
    for (String key : List.of("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")) {
      named.add(config.path(key));
    }
    config.path("additional_special_tokens").forEach(named::add);
    config.path("extra_special_tokens").forEach(named::add);
    for (JsonNode n : named) {
      String content = n.isTextual() ? n.asText() : n.path("content").asText(null);
      if (content != null && !content.isEmpty() && !known.contains(content) && vocab.get(content) < 0) {
        problems.add("tokenizer_config.json names a special token that tokenizer.json lacks (transformers would add it)");
      }
    }
    return problems;
  }

  private static PostProcessor overrideBos(PostProcessor post, boolean addBos, TokenizerJson json, StringIntMap vocab,
      JsonNode config, List<String> reasons) {
    if (!addBos) {
      return new PostProcessor(new int[0], post.suffix());
    }
    JsonNode bos = config.path("bos_token");
    String content = bos.isTextual() ? bos.asText() : bos.path("content").asText(null);
    if (content == null) {
      reasons.add("addBosToken override without a bos_token in tokenizer_config.json");
      return null;
    }
    for (TokenizerJson.AddedToken t : json.addedTokens()) {
      if (t.content().equals(content)) {
        return new PostProcessor(new int[] {t.id()}, post.suffix());
      }
    }
    if (vocab.get(content) >= 0) {
      return new PostProcessor(new int[] {vocab.get(content)}, post.suffix());
    }
    reasons.add("bos_token of tokenizer_config.json is not in the vocabulary");
    return null;
  }
}
