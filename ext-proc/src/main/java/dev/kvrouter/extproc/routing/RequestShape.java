package dev.kvrouter.extproc.routing;

/**
 * The size of one request in the cost model's units.
 *
 * @param promptTokens prompt tokens (exact, or the request path's estimate when it could not tokenize)
 * @param blockSize KV block size in tokens
 * @param promptBlocks blocks the prompt occupies, the partial last one included
 * @param fullBlocks full prompt blocks with a known hash (the part a cache can hold)
 * @param outputBlocks blocks the expected output will occupy
 */
public record RequestShape(long promptTokens, int blockSize, int promptBlocks, int fullBlocks, int outputBlocks) {

  public static RequestShape of(long promptTokens, int blockSize, int fullBlocks, int outputTokens) {
    int pb = (int) Math.min(Integer.MAX_VALUE, (promptTokens + blockSize - 1) / blockSize);
    // in long: max_tokens near Integer.MAX_VALUE with an uncapped output reservation overflowed to a negative
    // reservation, which the ledger refused with an exception (a 500)
    int ob = (int) Math.min(Integer.MAX_VALUE, (Math.max(0L, outputTokens) + blockSize - 1) / blockSize);
    return new RequestShape(promptTokens, blockSize, pb, Math.min(fullBlocks, pb), ob);
  }
}
