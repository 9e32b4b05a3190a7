package dev.kvrouter.extproc.tokenize;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.huggingface.tokenizers.jni.TokenizersLibrary;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;

/**
 * DJL's binding of the Rust tokenizers library, the reference-grade fallback. Built with truncation and
 * padding off (DJL truncates to 512 tokens by default). {@link #encode} asks the native side for the ids
 * only; DJL's own {@code encode} also copies tokens, offsets, masks and type ids into Java for every call.
 *
 * <p>Thread-safe (the native tokenizer is immutable; each call owns its native encoding).
 */
final class DjlEngine implements AutoCloseable {
  private final HuggingFaceTokenizer tokenizer;

  private DjlEngine(HuggingFaceTokenizer tokenizer) {
    this.tokenizer = tokenizer;
  }

  /** Loads {@code dir/tokenizer.json} (and DJL reads {@code tokenizer_config.json} next to it). */
  static DjlEngine load(Path dir) throws IOException {
    HuggingFaceTokenizer t = HuggingFaceTokenizer.newInstance(dir,
        Map.of("truncation", "false", "padding", "false", "addSpecialTokens", "false"));
    return new DjlEngine(t);
  }

  int[] encode(String text, boolean addSpecialTokens) {
    long encoding = TokenizersLibrary.LIB.encode(tokenizer.getHandle(), text, addSpecialTokens);
    try {
      long[] ids = TokenizersLibrary.LIB.getTokenIds(encoding);
      int[] out = new int[ids.length];
      for (int i = 0; i < ids.length; i++) {
        out[i] = (int) ids[i];
      }
      return out;
    } finally {
      TokenizersLibrary.LIB.deleteEncoding(encoding);
    }
  }

  /** DJL's ordinary encode (all encoding fields copied to Java): the baseline in benchmarks. */
  long[] encodeThroughDjlApi(String text, boolean addSpecialTokens) {
    return tokenizer.encode(text, addSpecialTokens, false).getIds();
  }

  @Override
  public void close() {
    tokenizer.close();
  }
}
