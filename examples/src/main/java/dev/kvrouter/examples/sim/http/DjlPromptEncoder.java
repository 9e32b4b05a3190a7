package dev.kvrouter.examples.sim.http;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Tokenizes completion prompts with the model's own {@code tokenizer.json} through DJL's binding of Hugging
 * Face {@code tokenizers} (the same Rust library vLLM uses), with special tokens added and truncation off.
 *
 * <p>Chat requests are not rendered here: the chat template must be the router's renderer (same Jinja
 * semantics, same template), which is wired in when it is available; until then chat with text is refused.
 *
 * <p>Thread-safe: the native tokenizer is safe for concurrent encode calls; decoded output text is memoized.
 */
public final class DjlPromptEncoder implements PromptEncoder, AutoCloseable {

  /** The output passage: the simulated model "says" these tokens in a cycle, so responses read as text. */
  private static final String OUTPUT_PASSAGE = " The quick brown fox jumps over the lazy dog while the router keeps "
      + "every prefix warm and each worker answers in turn with steady tokens of simulated text";

  private final HuggingFaceTokenizer tokenizer;
  private final int[] outputVocabulary;
  private final ConcurrentHashMap<Integer, String> text = new ConcurrentHashMap<>();

  private DjlPromptEncoder(HuggingFaceTokenizer tokenizer) {
    this.tokenizer = tokenizer;
    long[] ids = tokenizer.encode(OUTPUT_PASSAGE, false, false).getIds();
    Set<Integer> distinct = new LinkedHashSet<>();
    for (long id : ids) {
      distinct.add((int) id);
    }
    this.outputVocabulary = distinct.stream().mapToInt(Integer::intValue).toArray();
  }

  /**
   * Loads {@code tokenizer.json} from {@code dir} (a directory holding it, as under
   * {@code .cache/tokenizers/<model>/}).
   *
   * @throws IOException if the file is missing or unreadable
   */
  public static DjlPromptEncoder load(Path dir) throws IOException {
    Path file = Files.isDirectory(dir) ? dir.resolve("tokenizer.json") : dir;
    if (!Files.isRegularFile(file)) {
      throw new IOException("tokenizer file not found: " + file);
    }
    HuggingFaceTokenizer t = HuggingFaceTokenizer.builder()
        .optTokenizerPath(file)
        .optAddSpecialTokens(true)
        .optTruncation(false)
        .optPadding(false)
        .optWithOverflowingTokens(false)
        .build();
    return new DjlPromptEncoder(t);
  }

  @Override
  public int[] encodeCompletion(String prompt) {
    long[] ids = tokenizer.encode(prompt, true, false).getIds();
    int[] out = new int[ids.length];
    for (int i = 0; i < ids.length; i++) {
      out[i] = (int) ids[i];
    }
    return out;
  }

  @Override
  public int[] encodeChat(JsonNode request) {
    // TODO(chat): render with the router's chat template renderer (ext-proc) once it lands, then tokenize
    // without special tokens. Until then a text chat request cannot be made identical to the router's view.
    throw new Unsupported("chat templates are not wired into the simulated worker yet: use /v1/completions");
  }

  @Override
  public String tokenText(int tokenId) {
    String t = text.get(tokenId);
    if (t == null) {
      t = tokenizer.decode(new long[] {tokenId}, false);
      if (text.size() < 4096) { // output tokens come from a small vocabulary; anything else is not memoized
        text.put(tokenId, t);
      }
    }
    return t;
  }

  @Override
  public int[] outputVocabulary() {
    return Arrays.copyOf(outputVocabulary, outputVocabulary.length);
  }

  @Override
  public void close() {
    tokenizer.close();
  }
}
