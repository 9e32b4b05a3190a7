package dev.kvrouter.extproc.decision;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * Finds {@code usage.prompt_tokens} and {@code usage.prompt_tokens_details.cached_tokens} in an OpenAI response
 * as its bytes stream past, without buffering it: a JSON body, or an SSE stream whose final chunk carries the
 * usage (clients ask for it with {@code stream_options.include_usage}). The last occurrence wins, so engines
 * that report usage on every chunk give the final count. The Responses API names them {@code input_tokens} and
 * {@code input_tokens_details.cached_tokens}, in the response object or, streamed, in the {@code response} of its
 * {@code response.completed} event (vLLM's {@code ResponseUsage}); both spellings count. The Anthropic Messages API
 * reports {@code input_tokens} with the cached part apart ({@code cache_read_input_tokens}, and
 * {@code cache_creation_input_tokens}; vLLM's {@code _build_anthropic_usage} subtracts both from the prompt's
 * tokens), at the top or, streamed, in the {@code message} of its {@code message_start} event; the prompt is their
 * sum. An engine that reports neither cache field (older vLLM) reports the whole prompt as input and nothing cached.
 *
 * <p>A small structural scanner rather than a parser: it tracks strings (with escapes), nesting depth and the
 * last object key, and matches only the three key names at the right depths (the usage object must be a member
 * of a top-level object), so text the model generates, which arrives inside escaped JSON strings, can never be
 * mistaken for usage. SSE framing ({@code data:}, blank lines, {@code [DONE]}) is just bytes outside any
 * object. Constant memory whatever the response size. One instance per response; not thread-safe.
 */
public final class UsageScanner {

  private static final byte[][] KEYS = {
      "usage".getBytes(StandardCharsets.US_ASCII),
      "prompt_tokens_details".getBytes(StandardCharsets.US_ASCII),
      "cached_tokens".getBytes(StandardCharsets.US_ASCII),
      "prompt_tokens".getBytes(StandardCharsets.US_ASCII),
      "response".getBytes(StandardCharsets.US_ASCII),
      "input_tokens_details".getBytes(StandardCharsets.US_ASCII),
      "input_tokens".getBytes(StandardCharsets.US_ASCII),
      "message".getBytes(StandardCharsets.US_ASCII),
      "cache_read_input_tokens".getBytes(StandardCharsets.US_ASCII),
      "cache_creation_input_tokens".getBytes(StandardCharsets.US_ASCII)};
  private static final int USAGE = 0;
  private static final int DETAILS = 1;
  private static final int CACHED = 2;
  private static final int PROMPT = 3;
  private static final int RESPONSE = 4;
  /** The Responses API's names for {@link #DETAILS} and {@link #PROMPT}; {@link #matched} reads them as those. */
  private static final int INPUT_DETAILS = 5;
  private static final int INPUT = 6;
  /** The Messages API's streamed {@code message_start}: read as {@link #RESPONSE}. */
  private static final int MESSAGE = 7;
  private static final int CACHE_READ = 8;
  private static final int CACHE_CREATION = 9;
  private static final int NONE = -1;
  private static final int ALL_KEYS = (1 << KEYS.length) - 1;

  private boolean inString;
  private boolean escape;
  private int keyMask;
  private int keyPos;
  private int lastString = NONE;
  private boolean lastWasString;
  private int pendingKey = NONE;
  private int pendingDepth;
  private int depth;
  private int usageDepth = -1;
  private int detailsDepth = -1;
  /** Depth of a top-level {@code response} object: a Responses stream's final event carries the usage in it. */
  private int responseDepth = -1;
  private boolean inNumber;
  private long number;
  private int numberDigits;
  private int numberKey;
  private long cachedTokens = -1;
  private long promptTokens = -1;
  /** The last usage object's Anthropic cache fields, -1 where it had none. */
  private long cacheRead = -1;
  private long cacheCreation = -1;
  private long bytes;
  /** Bytes the state machine took one at a time ({@link #next}); the rest were skipped inside strings. */
  private long stepped;

  /**
   * A read-only buffer (a protobuf {@code ByteString}'s view) hides its array: it is copied in slices into a
   * per-thread array, so the scan and its skips run over plain bytes rather than through bounds-checked {@code get}s.
   */
  private static final ThreadLocal<byte[]> SCRATCH = ThreadLocal.withInitial(() -> new byte[8192]);

  public void feed(ByteBuffer buf) {
    if (buf.hasArray()) {
      feed(buf.array(), buf.arrayOffset() + buf.position(), buf.remaining());
      return;
    }
    byte[] scratch = SCRATCH.get();
    ByteBuffer view = buf.duplicate();
    while (view.hasRemaining()) {
      int n = Math.min(scratch.length, view.remaining());
      view.get(scratch, 0, n);
      feed(scratch, 0, n);
    }
  }

  public void feed(byte[] b, int off, int len) {
    int end = off + len;
    int i = off;
    while (i < end) {
      if (inString && keyMask == 0 && !escape) {
        // no key can match in this string any more: only its closing quote or an escape changes the state, and most
        // of a response (ids, the model's name, the generated text) is such strings
        byte c;
        while ((c = b[i]) != '"' && c != '\\') {
          if (++i == end) {
            bytes += len;
            return;
          }
        }
      }
      next(b[i++]);
    }
    bytes += len;
  }

  /** {@code usage.prompt_tokens_details.cached_tokens}, or -1 when the response did not report it. */
  public long cachedTokens() {
    long read = current(CACHE_READ, cacheRead);
    return read >= 0 ? read : current(CACHED, cachedTokens);
  }

  /** {@code usage.prompt_tokens}, or -1. */
  public long promptTokens() {
    long prompt = current(PROMPT, promptTokens);
    long read = current(CACHE_READ, cacheRead);
    long creation = current(CACHE_CREATION, cacheCreation);
    if (prompt < 0 || read < 0 && creation < 0) {
      return prompt;
    }
    return prompt + Math.max(0, read) + Math.max(0, creation);
  }

  /** A key's value, the number being read for it included (a body that ends in the middle of one). */
  private long current(int key, long value) {
    return inNumber && numberKey == key ? number : value;
  }

  public long bytes() {
    return bytes;
  }

  long stepped() {
    return stepped;
  }

  private void next(byte c) {
    stepped++;
    if (inString) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
        keyMask = 0; // none of the keys has an escape in it
      } else if (c == '"') {
        inString = false;
        lastString = matched();
        lastWasString = true;
      } else if (keyMask != 0) {
        for (int k = 0; k < KEYS.length; k++) {
          if ((keyMask & (1 << k)) != 0 && (keyPos >= KEYS[k].length || KEYS[k][keyPos] != c)) {
            keyMask &= ~(1 << k);
          }
        }
        keyPos++;
      }
      return;
    }
    if (inNumber) {
      if (c >= '0' && c <= '9') {
        if (numberDigits < 18) {
          number = number * 10 + (c - '0');
          numberDigits++;
        }
        return;
      }
      finishNumber();
    }
    switch (c) {
      case ' ', '\t', '\r', '\n' -> {
        // whitespace keeps "the last token was a string" for a following ':'
      }
      case '"' -> {
        valueKey();
        inString = true;
        keyMask = ALL_KEYS;
        keyPos = 0;
        lastWasString = false;
      }
      case ':' -> {
        if (lastWasString) {
          pendingKey = lastString;
          pendingDepth = depth;
        }
        lastWasString = false;
      }
      case '{' -> {
        int k = valueKey();
        depth++;
        if ((k == RESPONSE || k == MESSAGE) && depth == 2) {
          responseDepth = depth;
        } else if (k == USAGE && (depth == 2 || (responseDepth > 0 && depth == responseDepth + 1))) {
          usageDepth = depth;
          // the cache fields count with the input of their own usage object only
          cacheRead = -1;
          cacheCreation = -1;
        } else if (k == DETAILS && usageDepth > 0 && depth == usageDepth + 1) {
          detailsDepth = depth;
        }
        lastWasString = false;
      }
      case '[' -> {
        valueKey();
        depth++;
        lastWasString = false;
      }
      case '}', ']' -> {
        if (depth == detailsDepth) {
          detailsDepth = -1;
        }
        if (depth == usageDepth) {
          usageDepth = -1;
          detailsDepth = -1;
        }
        if (depth == responseDepth) {
          responseDepth = -1;
        }
        depth = Math.max(0, depth - 1);
        pendingKey = NONE;
        lastWasString = false;
      }
      case ',' -> {
        pendingKey = NONE;
        lastWasString = false;
      }
      default -> {
        int k = valueKey();
        if (c >= '0' && c <= '9'
            && ((k == CACHED && depth == detailsDepth)
                || ((k == PROMPT || k == CACHE_READ || k == CACHE_CREATION) && depth == usageDepth))) {
          inNumber = true;
          number = c - '0';
          numberDigits = 1;
          numberKey = k;
        }
        lastWasString = false;
      }
    }
  }

  /** The key whose value starts now, if it was a member of the current object; consumes it. */
  private int valueKey() {
    int k = pendingDepth == depth ? pendingKey : NONE;
    pendingKey = NONE;
    return k;
  }

  private int matched() {
    for (int k = 0; k < KEYS.length; k++) {
      if ((keyMask & (1 << k)) != 0 && KEYS[k].length == keyPos) {
        return k == INPUT_DETAILS ? DETAILS : k == INPUT ? PROMPT : k;
      }
    }
    return NONE;
  }

  private void finishNumber() {
    if (inNumber) {
      inNumber = false;
      switch (numberKey) {
        case CACHED -> cachedTokens = number;
        case CACHE_READ -> cacheRead = number;
        case CACHE_CREATION -> cacheCreation = number;
        default -> promptTokens = number;
      }
    }
  }
}
