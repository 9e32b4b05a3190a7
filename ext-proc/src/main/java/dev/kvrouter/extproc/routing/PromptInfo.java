package dev.kvrouter.extproc.routing;

/**
 * What the request path learned about a prompt: its length in tokens and its KV block identities. Never holds
 * token ids or text.
 *
 * @param tokens prompt tokens after the chat template
 * @param blockSize KV block size in tokens for this model
 * @param blockHashes hashes of the prompt's full blocks, in chain order ({@code tokens / blockSize} of them or
 *     fewer); not copied, must not be modified after routing
 */
public record PromptInfo(int tokens, int blockSize, long[] blockHashes) {

  public PromptInfo {
    if (tokens < 0 || blockSize <= 0) {
      throw new IllegalArgumentException("tokens must be >= 0 and blockSize > 0");
    }
    if (blockHashes == null) {
      blockHashes = new long[0];
    }
    if (blockHashes.length > tokens / blockSize) {
      throw new IllegalArgumentException(
          blockHashes.length + " block hashes for " + tokens + " tokens at block size " + blockSize);
    }
  }

  /** Blocks the prompt occupies, the partial last one included. */
  public int blocks() {
    return (tokens + blockSize - 1) / blockSize;
  }
}
