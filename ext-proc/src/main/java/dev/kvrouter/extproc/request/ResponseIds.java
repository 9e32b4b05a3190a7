package dev.kvrouter.extproc.request;

import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.concurrent.ThreadLocalRandom;
import net.openhft.hashing.LongHashFunction;

/**
 * Response ids of the Responses API that name the worker that answered. vLLM keeps stored responses on the API server
 * that produced them ({@code VLLM_ENABLE_RESPONSES_API_STORE}, in memory), so a request continuing one
 * ({@code previous_response_id}) fails on any other worker. vLLM uses the request's {@code request_id} as the
 * response's {@code id} (responses/protocol.py, {@code ResponsesResponse.from_request}), so the router writes one:
 * {@code resp_} and 32 hex digits like vLLM's own, the first 8 a tag of the worker's name, the rest random. Any router
 * replica, after any restart, reads the worker back from the id alone.
 */
public final class ResponseIds {

  private static final LongHashFunction HASH = LongHashFunction.xx3();
  private static final HexFormat HEX = HexFormat.of();
  private static final String PREFIX = "resp_";

  private ResponseIds() {}

  /** 32 bits of the worker's name: the first 8 hex digits of the ids minted for it. */
  public static int tag(String worker) {
    return (int) HASH.hashBytes(worker.getBytes(StandardCharsets.UTF_8));
  }

  /** A fresh response id naming {@code worker}. */
  public static String mint(String worker) {
    ThreadLocalRandom r = ThreadLocalRandom.current();
    return PREFIX + HEX.toHexDigits(tag(worker)) + HEX.toHexDigits(r.nextLong()) + HEX.toHexDigits(r.nextInt());
  }

  /**
   * The worker tag of an id shaped like a minted one, or null. An id vLLM minted itself has the same shape and a
   * random tag, which names no worker of a real fleet but with odds of fleet size in 2^32.
   */
  public static Integer tagOf(String id) {
    if (id == null || id.length() != PREFIX.length() + 32 || !id.startsWith(PREFIX)) {
      return null;
    }
    for (int i = PREFIX.length(); i < id.length(); i++) {
      char c = id.charAt(i);
      // ASCII lower-case hex only: Character.digit also reads other scripts' digits and upper case
      if ((c < '0' || c > '9') && (c < 'a' || c > 'f')) {
        return null;
      }
    }
    return (int) Long.parseLong(id, PREFIX.length(), PREFIX.length() + 8, 16);
  }
}
