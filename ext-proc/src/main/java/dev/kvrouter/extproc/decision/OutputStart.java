package dev.kvrouter.extproc.decision;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * Finds where a response's output begins as its bytes stream past: the moment the prefill is over, which frees the
 * request's prefill share in the load ledger and times its TTFT.
 *
 * <p>For completions and chat that is the first byte: vLLM sends a non-streamed body whole, and a stream's first
 * chunk (the chat role chunk too) with the first engine output. A streamed Responses answer is different: vLLM
 * sends {@code response.created} and {@code response.in_progress} as soon as it accepts the request
 * ({@code responses_stream_generator}), before the prefill, so those named events are a preamble and the output
 * begins with the first event of any other name. Data lines with no event name (chat and completions SSE), or a
 * body that is not SSE at all, begin it at once; so does a Messages API stream, whose first event ({@code
 * message_start}) vLLM sends with the first chat chunk.
 *
 * <p>A line scanner over SSE framing, with state carried across chunks in constant memory. One instance per
 * response; not thread-safe.
 */
public final class OutputStart {

  private static final byte[] EVENT = "event:".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] DATA = "data:".getBytes(StandardCharsets.US_ASCII);
  /** Longer names than this are none of the preamble's: the output has begun. */
  private static final int MAX_NAME = 32;
  private static final String[] PREAMBLE = {"response.created", "response.in_progress", "response.queued"};

  private boolean started;
  /** Bytes of the current line read, up to what tells its field. */
  private int pos;
  private boolean maybeEvent = true;
  private boolean maybeData = true;
  /** Reading the current line's event name. */
  private boolean inName;
  private final byte[] name = new byte[MAX_NAME];
  private int nameLength;
  /** The current event (since the last blank line) is named with a preamble name. */
  private boolean preambleEvent;
  /** Nothing but whitespace has been read. */
  private boolean empty = true;

  /** Feeds the next chunk; true once the output has begun (in this chunk or before). */
  public boolean feed(ByteBuffer chunk) {
    for (int i = chunk.position(); i < chunk.limit() && !started; i++) {
      next(chunk.get(i));
    }
    return started;
  }

  public boolean started() {
    return started;
  }

  private void next(byte c) {
    if (empty) {
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        return;
      }
      empty = false;
      if (c != 'e' && c != 'd' && c != ':') {
        started = true; // not SSE: a JSON body, or an error page
        return;
      }
    }
    if (c == '\n') {
      if (inName) {
        started = !preamble();
        preambleEvent = !started;
      } else if (pos == 0) {
        preambleEvent = false; // a blank line ends the event
      }
      pos = 0;
      maybeEvent = true;
      maybeData = true;
      inName = false;
      return;
    }
    if (c == '\r') {
      return;
    }
    if (inName) {
      if (nameLength == 0 && c == ' ') {
        return;
      }
      if (nameLength == MAX_NAME) {
        started = true; // no preamble name is this long
        return;
      }
      name[nameLength++] = c;
      return;
    }
    if (!maybeEvent && !maybeData) {
      return; // another field (id:, retry:, a comment): nothing to learn from the rest of the line
    }
    maybeEvent &= pos < EVENT.length && EVENT[pos] == c;
    maybeData &= pos < DATA.length && DATA[pos] == c;
    pos++;
    if (maybeEvent && pos == EVENT.length) {
      inName = true;
      nameLength = 0;
    } else if (maybeData && pos == DATA.length && !preambleEvent) {
      started = true; // data of an unnamed event (chat, completions)
    }
  }

  private boolean preamble() {
    for (String p : PREAMBLE) {
      if (p.length() == nameLength) {
        boolean same = true;
        for (int i = 0; i < nameLength && same; i++) {
          same = p.charAt(i) == name[i];
        }
        if (same) {
          return true;
        }
      }
    }
    return false;
  }
}
