package dev.kvrouter.extproc.tokenize;

import java.util.List;

/**
 * A model's tokenizer, producing exactly the ids the engine's Hugging Face tokenizer produces.
 *
 * <p>Use {@code addSpecialTokens = false} for a rendered chat prompt (the template already contains BOS and
 * the like; vLLM does the same) and {@code true} for a completions prompt string (adds what the
 * tokenizer's post-processor adds, e.g. BOS for Llama 3 and Gemma 3).
 *
 * <p>Thread-safe: one instance is shared by all request threads. {@link TokenCursor}s are not: each
 * belongs to the thread currently driving it.
 */
public interface Tokenizer extends AutoCloseable {

  /** Name for logs and metrics (the model directory name unless configured). */
  String name();

  /** Which implementation runs: {@code pure-java}, {@code djl-segmented} or {@code djl}. */
  String implementation();

  /** Stable identity of the tokenizer files (and implementation): equal ids for equal tokenization. */
  long fingerprint();

  /** The token ids of {@code text}. */
  int[] encode(CharSequence text, boolean addSpecialTokens);

  /**
   * The ids of {@code text} as the engine's Hugging Face tokenizer returns them with {@code truncation=True,
   * max_length=maxLength} and {@code truncation_side="left"}, which is how vLLM tokenizes a prompt with
   * {@code truncate_prompt_tokens} for a generating model ({@code TokenizeParams.get_encode_kwargs}; the side comes
   * from {@code vllm/tokenizers/registry.py}). tokenizers truncates the text's tokens first, to their last
   * {@code maxLength} minus what the post-processor adds, and then adds the post-processor's tokens: with
   * {@code addSpecialTokens} Llama 3.1 and Gemma 3 give BOS + the last {@code maxLength - 1} tokens, not the last
   * {@code maxLength} of the full encoding. Below the number of added tokens tokenizers' unsigned subtraction wraps
   * and nothing is cut (vLLM then slices the result itself).
   *
   * @return the ids, or null when this tokenizer cannot tell what its post-processor adds (a DJL fallback for a
   *     post-processor we do not parse) and special tokens are asked for
   */
  int[] encodeTruncatedLeft(CharSequence text, boolean addSpecialTokens, int maxLength);

  /**
   * An incremental encoding of {@code text}: tokens are produced segment by segment (and word by word inside
   * large segments), so the caller can hash full blocks as they complete and stop early.
   */
  TokenCursor cursor(CharSequence text, boolean addSpecialTokens);

  /**
   * As {@link #cursor(CharSequence, boolean)}, writing the ids into {@code buffer} (grown by copying when too
   * small), so a caller that tokenizes prompt after prompt on one thread keeps one buffer instead of allocating
   * a prompt-sized array each time. The cursor owns {@code buffer} for as long as it is used; afterwards the
   * caller takes back {@link TokenCursor#tokens()}, the possibly grown buffer, for its next cursor. Arrays
   * returned by {@link TokenCursor#finish()} are never {@link TokenCursor#tokens()}, so they stay the caller's.
   * Implementations may ignore the buffer (DJL's); their {@code tokens()} is then theirs alone, equally reusable
   * once the cursor is done.
   *
   * @param buffer a scratch array no one else uses, or null
   */
  default TokenCursor cursor(CharSequence text, boolean addSpecialTokens, int[] buffer) {
    return cursor(text, addSpecialTokens);
  }

  /**
   * How {@code text} splits into independently tokenized segments: added tokens (from the chat template)
   * and the text between them. Segment ids are cached across requests.
   */
  List<Segment> segments(CharSequence text);

  /** The calibrated characters-per-token estimate used for the unread rest of a prompt. */
  CharsPerTokenEstimator charsPerToken();

  /** Releases native resources (DJL); the pure-Java implementation holds none. */
  @Override
  void close();
}
