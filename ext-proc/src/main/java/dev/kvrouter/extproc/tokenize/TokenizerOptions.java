package dev.kvrouter.extproc.tokenize;

/**
 * How {@link TokenizerLoader} builds a tokenizer.
 *
 * @param implementation which implementation to use ({@link Implementation#AUTO}: pure Java when the
 *     tokenizer.json is fully supported, else DJL)
 * @param segmentCache shared cache of segment ids, or null for none
 * @param addBosToken null to follow tokenizer.json's post-processor (what transformers 5 does); true or false
 *     to force the BOS prefix of {@code add_special_tokens=true}, for engines on transformers 4 whose
 *     {@code LlamaTokenizerFast} honours {@code add_bos_token} from tokenizer_config.json (DeepSeek V3)
 * @param wordCacheSize slots of the per-tokenizer word cache (0 disables it)
 * @param name name for logs and metrics, or null for the directory name
 */
public record TokenizerOptions(Implementation implementation, SegmentCache segmentCache, Boolean addBosToken,
    int wordCacheSize, String name) {

  /** Implementation choice. */
  public enum Implementation {
    /** Pure Java when the tokenizer.json is fully supported, else {@link #DJL}. */
    AUTO,
    /** Pure Java or fail with {@link UnsupportedTokenizerException}. */
    PURE_JAVA,
    /** DJL per segment (cached) when added tokens can be split exactly, else DJL on the whole prompt. */
    DJL,
    /** DJL on the whole prompt, no segments, no cache: the plain reference. */
    DJL_UNSEGMENTED
  }

  public static final int DEFAULT_WORD_CACHE_SIZE = 1 << 15;

  public TokenizerOptions {
    if (implementation == null) {
      throw new IllegalArgumentException("implementation is required");
    }
    if (wordCacheSize < 0) {
      throw new IllegalArgumentException("wordCacheSize must not be negative");
    }
  }

  /** AUTO, no segment cache, tokenizer.json's BOS, default word cache. */
  public static TokenizerOptions defaults() {
    return new TokenizerOptions(Implementation.AUTO, null, null, DEFAULT_WORD_CACHE_SIZE, null);
  }

  public TokenizerOptions withImplementation(Implementation i) {
    return new TokenizerOptions(i, segmentCache, addBosToken, wordCacheSize, name);
  }

  public TokenizerOptions withSegmentCache(SegmentCache cache) {
    return new TokenizerOptions(implementation, cache, addBosToken, wordCacheSize, name);
  }

  public TokenizerOptions withAddBosToken(Boolean addBos) {
    return new TokenizerOptions(implementation, segmentCache, addBos, wordCacheSize, name);
  }

  public TokenizerOptions withWordCacheSize(int size) {
    return new TokenizerOptions(implementation, segmentCache, addBosToken, size, name);
  }

  public TokenizerOptions withName(String n) {
    return new TokenizerOptions(implementation, segmentCache, addBosToken, wordCacheSize, n);
  }
}
