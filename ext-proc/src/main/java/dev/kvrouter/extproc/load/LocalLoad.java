package dev.kvrouter.extproc.load;

/**
 * The router's own account of one worker at a moment: what it has sent there and not yet seen finish.
 *
 * @param prefillTokens prompt tokens still to be prefilled (charged at decision, released at first byte)
 * @param decodeBlocks distinct KV blocks held by the router's in-flight requests (shared prefixes once): the
 *     worker's memory
 * @param contextBlocks context blocks of the in-flight requests summed per request (prompt plus expected output,
 *     shared prefixes counted once per request that holds them): what every decode step reads, since paged
 *     attention reads each sequence's KV separately
 * @param requests in-flight requests
 * @param sincePrefillTokens net change of {@code prefillTokens} since the worker's last scrape arrived (reserved
 *     minus released, negative when more left than came)
 * @param sinceDecodeBlocks likewise for blocks
 * @param sinceRequests likewise for requests
 */
public record LocalLoad(
    long prefillTokens,
    long decodeBlocks,
    long contextBlocks,
    long requests,
    long sincePrefillTokens,
    long sinceDecodeBlocks,
    long sinceRequests) {

  public static final LocalLoad ZERO = new LocalLoad(0, 0, 0, 0, 0, 0, 0);
}
