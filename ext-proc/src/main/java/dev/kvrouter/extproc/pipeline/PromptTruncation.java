package dev.kvrouter.extproc.pipeline;

import dev.kvrouter.extproc.tokenize.Tokenizer;
import java.util.Arrays;

/**
 * {@code truncate_prompt_tokens} as vLLM 0.33.0 applies it to a generating model's prompt ({@code TokenizeParams} in
 * {@code vllm/renderers/params.py}: {@code get_encode_kwargs}, then {@code _token_truncation} after tokenizing).
 *
 * <ul>
 *   <li>Text, no {@code truncation_side}: the tokenizer truncates ({@code truncation=True, max_length=N}) on its own
 *       side, which {@code vllm/tokenizers/registry.py} sets to left for generating models. Hugging Face cuts the
 *       text's tokens and then adds the special tokens, so with {@code add_special_tokens} BOS survives: Llama 3.1
 *       keeps BOS + the last N-1 tokens ({@link Tokenizer#encodeTruncatedLeft}).
 *   <li>Text with {@code truncation_side}: vLLM encodes without truncation and slices the ids itself: the last N
 *       ({@code left}, BOS dropped) or the first N ({@code right}).
 *   <li>Token ids: sliced, on the request's side or the tokenizer's (left).
 * </ul>
 *
 * <p>{@code -1} means vLLM's maximum input ({@code max_model_len - 1}), which the router does not know: the prompt
 * is kept whole, exact for any prompt shorter than that (a longer one the engine truncates). vLLM's pre-trim of very
 * long text with an explicit side ({@code _text_len_check}, beyond {@code max_model_len} times the tokenizer's
 * longest token in characters) is likewise out of reach and only matters past the context length.
 */
public final class PromptTruncation {

  private PromptTruncation() {}

  /**
   * The ids vLLM prefills for a text prompt.
   *
   * @param keep {@code truncate_prompt_tokens}, or null
   * @param side {@code truncation_side} ({@code "left"}, {@code "right"}), or null
   * @return the ids, or null when the tokenizer cannot tell which special tokens survive truncation
   */
  public static int[] text(Tokenizer tokenizer, CharSequence text, boolean addSpecialTokens, Integer keep,
      String side) {
    if (keep == null || keep < 0) {
      return tokenizer.encode(text, addSpecialTokens);
    }
    if (side != null) {
      return slice(tokenizer.encode(text, addSpecialTokens), keep, side);
    }
    int[] ids = tokenizer.encodeTruncatedLeft(text, addSpecialTokens, keep);
    // _token_truncation still runs: it only bites when N is below the special tokens (tokenizers then cut nothing).
    return ids == null ? null : slice(ids, keep, "left");
  }

  /** The ids vLLM prefills for a token-id prompt: {@code _token_truncation}, left unless the request says right. */
  public static int[] tokens(int[] ids, Integer keep, String side) {
    return keep == null || keep < 0 ? ids : slice(ids, keep, side == null ? "left" : side);
  }

  private static int[] slice(int[] ids, int keep, String side) {
    if (ids.length <= keep) {
      return ids;
    }
    return "right".equals(side) ? Arrays.copyOf(ids, keep) : Arrays.copyOfRange(ids, ids.length - keep, ids.length);
  }
}
