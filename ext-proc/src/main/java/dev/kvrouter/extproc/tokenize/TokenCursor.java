package dev.kvrouter.extproc.tokenize;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

/**
 * An incremental tokenization of one prompt, for early stopping on the request path: advance until the
 * next block would be new to every worker, estimate the rest from {@link #estimatedTotalTokens()}, and
 * finish the rest elsewhere with {@link #finishAsync(Executor)} if the index needs the full chain.
 *
 * <p>Every token returned is final and equal to the same position of a full encoding.
 *
 * <p>Not thread-safe: owned by one thread at a time. After {@link #finishAsync} the cursor belongs to the
 * executor until the future completes.
 */
public interface TokenCursor {

  /**
   * Tokenizes at least {@code minNewTokens} more tokens (fewer only at the end of the prompt). Segments are
   * taken whole when cached; otherwise work stops at the first word boundary past the target.
   *
   * @return the number of tokens available now
   */
  int advance(int minNewTokens);

  /** True once every token of the prompt is available. */
  boolean isComplete();

  /** Tokens available so far. */
  int tokenCount();

  /**
   * The tokens so far, as the live backing array: valid up to {@link #tokenCount()}, and replaced when it
   * grows (fetch it again after each {@link #advance}). Do not modify.
   */
  int[] tokens();

  /** Characters of the prompt not tokenized yet (0 when complete). */
  int remainingChars();

  /**
   * Tokens so far plus an estimate for the rest: added tokens still ahead are counted exactly, text by the
   * tokenizer's calibrated characters per token. Exact once complete.
   */
  long estimatedTotalTokens();

  /** Tokenizes the rest on the calling thread and returns all ids. */
  int[] finish();

  /** Tokenizes the rest on {@code executor}; the future completes with all ids. */
  default CompletableFuture<int[]> finishAsync(Executor executor) {
    return CompletableFuture.supplyAsync(this::finish, executor);
  }
}
