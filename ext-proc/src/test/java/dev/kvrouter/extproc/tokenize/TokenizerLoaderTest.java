package dev.kvrouter.extproc.tokenize;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.extproc.tokenize.TokenizerOptions.Implementation;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Load-time support detection on small synthetic tokenizer.json files: supported files run in pure Java and
 * agree with DJL; each unsupported feature is named and sends AUTO to DJL; configurations no implementation
 * reproduces are refused.
 */
class TokenizerLoaderTest {
  private static final ObjectMapper MAPPER = new ObjectMapper();
  private static final List<String> TEXTS = List.of("hello world", "<|x|>hello<|x|> world's 123", " hello  \n\n wor",
      "ﬁne <|x|>", "", "héllo wörld 😀");

  @TempDir
  Path dir;

  /** A ByteLevel BPE tokenizer with a few merges, one special token and a BOS template. */
  private static ObjectNode tinyTokenizer() {
    ObjectNode root = MAPPER.createObjectNode();
    root.put("version", "1.0");
    root.putNull("truncation");
    root.putNull("padding");
    ArrayNode added = root.putArray("added_tokens");
    added.addObject().put("id", 266).put("content", "<|x|>").put("single_word", false).put("lstrip", false)
        .put("rstrip", false).put("normalized", false).put("special", true);
    root.putNull("normalizer");
    ObjectNode pre = root.putObject("pre_tokenizer");
    pre.put("type", "Sequence");
    ArrayNode steps = pre.putArray("pretokenizers");
    steps.addObject().put("type", "Split").put("behavior", "Isolated").put("invert", false)
        .putObject("pattern").put("Regex", SplitPattern.QWEN);
    steps.addObject().put("type", "ByteLevel").put("add_prefix_space", false).put("trim_offsets", false)
        .put("use_regex", false);
    ObjectNode post = root.putObject("post_processor");
    post.put("type", "TemplateProcessing");
    post.putArray("single").addObject().putObject("SpecialToken").put("id", "<|x|>").put("type_id", 0);
    ((ArrayNode) post.get("single")).addObject().putObject("Sequence").put("id", "A").put("type_id", 0);
    post.putArray("pair");
    post.putObject("special_tokens").putObject("<|x|>").put("id", "<|x|>")
        .<ObjectNode>set("ids", MAPPER.createArrayNode().add(266))
        .set("tokens", MAPPER.createArrayNode().add("<|x|>"));
    root.putNull("decoder");
    ObjectNode model = root.putObject("model");
    model.put("type", "BPE").putNull("dropout");
    model.putNull("unk_token");
    model.putNull("continuing_subword_prefix");
    model.putNull("end_of_word_suffix");
    model.put("fuse_unk", false).put("byte_fallback", false).put("ignore_merges", false);
    ObjectNode vocab = model.putObject("vocab");
    for (int b = 0; b < 256; b++) {
      vocab.put(String.valueOf(ByteLevelAlphabet.CHARS[b]), b);
    }
    ArrayNode merges = model.putArray("merges");
    String[][] pairs = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "w"}, {"o", "r"}, {"Ġw", "or"},
      {"Ġwor", "l"}, {"Ġworl", "d"}, {"1", "2"}};
    int id = 256;
    for (String[] p : pairs) {
      merges.addArray().add(p[0]).add(p[1]);
      vocab.put(p[0] + p[1], id++);
    }
    return root;
  }

  private Path write(ObjectNode tokenizer, ObjectNode config) throws Exception {
    Files.writeString(dir.resolve("tokenizer.json"), MAPPER.writeValueAsString(tokenizer));
    Files.writeString(dir.resolve("tokenizer_config.json"), MAPPER.writeValueAsString(config));
    return dir;
  }

  private Path write(Consumer<ObjectNode> change) throws Exception {
    ObjectNode t = tinyTokenizer();
    change.accept(t);
    return write(t, MAPPER.createObjectNode());
  }

  private static void assertAgreesWithDjl(Tokenizer t, Path dir) throws Exception {
    try (Tokenizer djl = TokenizerLoader.load(dir, TokenizerOptions.defaults().withImplementation(Implementation.DJL_UNSEGMENTED))) {
      for (String text : TEXTS) {
        for (boolean special : new boolean[] {false, true}) {
          assertThat(t.encode(text, special)).as("%s special=%s", text, special).containsExactly(djl.encode(text, special));
        }
      }
    }
  }

  @Test
  void supportedFile_runsInPureJava_andAgreesWithDjl() throws Exception {
    Path d = write(t -> { });
    try (Tokenizer t = TokenizerLoader.load(d, TokenizerOptions.defaults())) {
      assertThat(t.implementation()).isEqualTo("pure-java");
      assertThat(t.encode("hello world", false)).containsExactly(259, 264);
      assertThat(t.encode("hello world", true)).containsExactly(266, 259, 264);
      assertAgreesWithDjl(t, d);
    }
  }

  @Test
  void addedTokenWithLstrip_cannotBeSegmented_soAutoUsesWholePromptDjl() throws Exception {
    Path d = write(t -> ((ObjectNode) t.get("added_tokens").get(0)).put("lstrip", true));
    assertThatThrownBy(() -> TokenizerLoader.load(d, TokenizerOptions.defaults().withImplementation(Implementation.PURE_JAVA)))
        .isInstanceOf(UnsupportedTokenizerException.class)
        .satisfies(e -> assertThat(((UnsupportedTokenizerException) e).reasons()).anyMatch(r -> r.contains("lstrip")));
    try (Tokenizer t = TokenizerLoader.load(d, TokenizerOptions.defaults())) {
      assertThat(t.implementation()).isEqualTo("djl");
      assertThat(t.segments("a<|x|>b")).hasSize(1);
      assertAgreesWithDjl(t, d);
    }
  }

  @Test
  void addedTokenIdThatTokenizersWouldReassign_goesToDjl() throws Exception {
    Path d = write(t -> ((ObjectNode) t.get("added_tokens").get(0)).put("id", 1000));
    assertThatThrownBy(() -> TokenizerLoader.load(d, TokenizerOptions.defaults().withImplementation(Implementation.PURE_JAVA)))
        .satisfies(e -> assertThat(((UnsupportedTokenizerException) e).reasons()).anyMatch(r -> r.contains("(266)")));
    try (Tokenizer t = TokenizerLoader.load(d, TokenizerOptions.defaults())) {
      assertThat(t.implementation()).isEqualTo("djl");
      assertThat(t.encode("<|x|>", false)).containsExactly(266);
    }
  }

  @Test
  void unsupportedNormalizer_keepsSegmentsButEncodesThemWithDjl() throws Exception {
    Path d = write(t -> t.putObject("normalizer").put("type", "NFKC"));
    assertThatThrownBy(() -> TokenizerLoader.load(d, TokenizerOptions.defaults().withImplementation(Implementation.PURE_JAVA)))
        .satisfies(e -> assertThat(((UnsupportedTokenizerException) e).reasons()).containsExactly("normalizer type NFKC"));
    SegmentCache cache = SegmentCache.create(10_000, 1, Runnable::run);
    try (Tokenizer t = TokenizerLoader.load(d, TokenizerOptions.defaults().withSegmentCache(cache))) {
      assertThat(t.implementation()).isEqualTo("djl-segmented");
      assertThat(t.segments("ﬁne <|x|>")).containsExactly(new Segment(0, 4, -1), new Segment(4, 9, 266));
      assertAgreesWithDjl(t, d);
      assertAgreesWithDjl(t, d);
      assertThat(cache.stats().hits()).isPositive();
    }
  }

  @Test
  void regexWithoutAHandWrittenMatcher_isNamed() throws Exception {
    Path d = write(t -> ((ObjectNode) t.get("pre_tokenizer").get("pretokenizers").get(0).get("pattern")).put("Regex", "\\w+"));
    assertThatThrownBy(() -> TokenizerLoader.load(d, TokenizerOptions.defaults().withImplementation(Implementation.PURE_JAVA)))
        .satisfies(e -> assertThat(((UnsupportedTokenizerException) e).reasons())
            .containsExactly("pre_tokenizer Split regex without a hand-written matcher"));
    try (Tokenizer t = TokenizerLoader.load(d, TokenizerOptions.defaults())) {
      assertThat(t.implementation()).isEqualTo("djl-segmented");
      assertAgreesWithDjl(t, d);
    }
  }

  @Test
  void otherModelTypes_andDropout_areNamed() throws Exception {
    Path wordPiece = write(t -> ((ObjectNode) t.get("model")).put("type", "WordPiece"));
    assertThatThrownBy(() -> TokenizerLoader.load(wordPiece, TokenizerOptions.defaults().withImplementation(Implementation.PURE_JAVA)))
        .satisfies(e -> assertThat(((UnsupportedTokenizerException) e).reasons()).containsExactly("model type WordPiece"));
    Path dropout = write(t -> ((ObjectNode) t.get("model")).put("dropout", 0.1));
    assertThatThrownBy(() -> TokenizerLoader.load(dropout, TokenizerOptions.defaults().withImplementation(Implementation.PURE_JAVA)))
        .satisfies(e -> assertThat(((UnsupportedTokenizerException) e).reasons()).containsExactly("BPE dropout"));
  }

  @Test
  void splitSpecialTokensInConfig_isRefusedForEveryImplementation() throws Exception {
    Path d = write(tinyTokenizer(), MAPPER.createObjectNode().put("split_special_tokens", true));
    assertThatThrownBy(() -> TokenizerLoader.load(d, TokenizerOptions.defaults()))
        .isInstanceOf(UnsupportedTokenizerException.class).hasMessageContaining("split_special_tokens");
  }

  @Test
  void tokenDeclaredOnlyInConfig_isRefused() throws Exception {
    ObjectNode config = MAPPER.createObjectNode();
    config.putObject("added_tokens_decoder").putObject("1001").put("content", "<|y|>").put("special", true);
    Path d = write(tinyTokenizer(), config);
    assertThatThrownBy(() -> TokenizerLoader.load(d, TokenizerOptions.defaults()))
        .isInstanceOf(UnsupportedTokenizerException.class).hasMessageContaining("1001");
    Path named = write(tinyTokenizer(), MAPPER.createObjectNode().put("bos_token", "<s>"));
    assertThatThrownBy(() -> TokenizerLoader.load(named, TokenizerOptions.defaults()))
        .isInstanceOf(UnsupportedTokenizerException.class).hasMessageContaining("special token");
  }

  @Test
  void missingTokenizerJson_failsWithThePath() {
    assertThatThrownBy(() -> TokenizerLoader.load(dir, TokenizerOptions.defaults()))
        .isInstanceOf(NoSuchFileException.class).hasMessageContaining("tokenizer.json");
  }

  @Test
  void unpairedSurrogate_isATokenizationError() throws Exception {
    try (Tokenizer t = TokenizerLoader.load(write(x -> { }), TokenizerOptions.defaults())) {
      assertThatThrownBy(() -> t.encode("bad \ud800 text", false)).isInstanceOf(TokenizationException.class)
          .hasMessageNotContaining("bad");
    }
  }

  @Test
  void bosOverride_addsOrRemovesThePrefixOnly() throws Exception {
    String text = "Hello there";
    Tokenizer deepseek = GoldenFixtures.tokenizer("deepseek_v3", Implementation.PURE_JAVA);
    // transformers 5 (the fixtures) adds nothing for DeepSeek V3; transformers 4 adds BOS (id 0).
    assertThat(deepseek.encode(text, true)).containsExactly(deepseek.encode(text, false));
    try (Tokenizer withBos = TokenizerLoader.load(GoldenFixtures.tokenizerDir("deepseek_v3"),
        TokenizerOptions.defaults().withAddBosToken(true))) {
      int[] ids = withBos.encode(text, true);
      assertThat(ids[0]).isZero();
      assertThat(Arrays.copyOfRange(ids, 1, ids.length)).containsExactly(deepseek.encode(text, false));
    }
    try (Tokenizer noBos = TokenizerLoader.load(GoldenFixtures.tokenizerDir("llama3_1"),
        TokenizerOptions.defaults().withAddBosToken(false))) {
      assertThat(noBos.encode(text, true)).containsExactly(noBos.encode(text, false));
    }
  }
}
