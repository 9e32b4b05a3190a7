package dev.kvrouter.examples.loadgen;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.workload.Prompt;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.io.IOException;
import java.net.ConnectException;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Flow;
import java.util.concurrent.Future;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import org.HdrHistogram.Histogram;

/**
 * One streamed request: reads the response line by line as it arrives, timestamps the first content chunk
 * (TTFT) and the gaps between content chunks (ITL), and takes {@code usage} from the final chunk.
 *
 * <p>Concurrency: the HTTP client delivers headers and lines on its executor, one call at a time; a timeout or
 * the end of the run may fail the exchange from another thread. Every state change is under this object's lock,
 * and {@link #finish} runs once, whoever gets there first.
 */
final class StreamingExchange implements HttpResponse.BodyHandler<Void>, Flow.Subscriber<String> {

  static final String SERVED_BY = "x-kvrouter-served-by";
  static final String DECISION = "x-kvrouter-decision";

  private static final ObjectMapper JSON = new ObjectMapper();
  /** Bound on one SSE event and on a kept error body. */
  private static final int MAX_EVENT_CHARS = 1 << 20;
  private static final int MAX_ERROR_CHARS = 200;

  private final WorkloadRequest request;
  private final long dueMicros;
  private final long t0Nanos;
  private final long sentNanos;
  private final Histogram itl;
  private final Consumer<StreamingExchange> onFinish;
  private final LongSupplier nanoClock;

  private int status;
  private String servedBy;
  private String decisionId;
  private Flow.Subscription subscription;
  private Future<?> timeoutTask;
  private Future<?> sendFuture;
  private final StringBuilder event = new StringBuilder();
  private final StringBuilder errorBody = new StringBuilder();
  private long firstContentNanos = -1;
  private long lastContentNanos = -1;
  private int contentChunks;
  /** The answer's token ids as streamed ({@code token_id:<id>} texts), only for a token request that scripts one. */
  private final int[] answerIds;
  /** A Messages answer's {@code stop_reason}, once its {@code message_delta} arrived. */
  private String stopReason;
  /** The answer's text as streamed, only for a chat request that scripts one; bounded by {@link #maxAnswerChars}. */
  private final StringBuilder answerText;
  private final int maxAnswerChars;
  private int answerIdsRead;
  private boolean answerUnreadable;
  private long itlMaxMicros = -1;
  private int promptTokens = -1;
  private int cachedTokens = -1;
  private int completionTokens = -1;
  private boolean sawDone;
  private boolean streamError;
  private boolean finished;
  private RequestRecord record;
  private String errorDetail;

  /**
   * @param dueMicros when the request was due (its arrival, or later for a closed-loop turn held for its
   *     predecessor: when that one completed), recorded as its scheduled time so the send lag stays the driver's
   * @param nanoClock the clock of every timestamp ({@code System::nanoTime}; tests pass their own)
   */
  StreamingExchange(WorkloadRequest request, long dueMicros, long t0Nanos, long sentNanos, Histogram itl,
      Consumer<StreamingExchange> onFinish, LongSupplier nanoClock) {
    this.dueMicros = dueMicros;
    this.nanoClock = nanoClock;
    this.request = request;
    this.t0Nanos = t0Nanos;
    this.sentNanos = sentNanos;
    this.itl = itl;
    this.onFinish = onFinish;
    boolean chat = request.prompt().format().templated();
    this.answerIds = request.answer() == null || chat ? null : new int[request.answer().length()];
    this.answerText = request.answer() == null || !chat ? null : new StringBuilder();
    // the script's words are short: far more than its text, far less than a runaway stream
    this.maxAnswerChars = request.answer() == null ? 0 : 64 + 32 * request.answer().length();
  }

  synchronized void attach(Future<?> send, Future<?> timeout) {
    this.sendFuture = send;
    this.timeoutTask = timeout;
    if (finished) {
      timeout.cancel(false);
    }
  }

  @Override
  public synchronized HttpResponse.BodySubscriber<Void> apply(HttpResponse.ResponseInfo info) {
    status = info.statusCode();
    servedBy = info.headers().firstValue(SERVED_BY).orElse(null);
    decisionId = info.headers().firstValue(DECISION).orElse(null);
    return HttpResponse.BodySubscribers.fromLineSubscriber(this, s -> null, StandardCharsets.UTF_8, null);
  }

  @Override
  public synchronized void onSubscribe(Flow.Subscription s) {
    subscription = s;
    if (finished) {
      s.cancel();
    } else {
      s.request(Long.MAX_VALUE);
    }
  }

  @Override
  public synchronized void onNext(String line) {
    if (finished) {
      return;
    }
    long now = nanoClock.getAsLong();
    if (status != 200) {
      if (errorBody.length() < MAX_ERROR_CHARS) {
        errorBody.append(line, 0, Math.min(line.length(), MAX_ERROR_CHARS - errorBody.length()));
      }
      return;
    }
    if (line.isEmpty()) {
      dispatch(now);
    } else if (line.startsWith("data:")) {
      if (event.length() > 0) {
        event.append('\n');
      }
      if (event.length() + line.length() <= MAX_EVENT_CHARS) {
        event.append(line, line.length() > 5 && line.charAt(5) == ' ' ? 6 : 5, line.length());
      }
    }
    // other SSE fields (event:, id:, retry:, comments) carry nothing we measure
  }

  @Override
  public synchronized void onError(Throwable t) {
    fail(t);
  }

  @Override
  public synchronized void onComplete() {
    long now = nanoClock.getAsLong();
    dispatch(now);
    String error;
    if (status != 200) {
      error = "http_" + status;
      errorDetail = errorBody.toString();
    } else if (streamError) {
      error = "stream_error";
    } else if (!sawDone) {
      error = "incomplete";
    } else {
      error = null;
    }
    finish(error, now);
  }

  /** The send future failed (connect, timeout before headers, reset) or the body failed mid-stream. */
  synchronized void fail(Throwable t) {
    Throwable c = t;
    while ((c instanceof CompletionException || c instanceof java.util.concurrent.ExecutionException)
        && c.getCause() != null) {
      c = c.getCause();
    }
    String kind;
    if (c instanceof HttpTimeoutException) {
      kind = "timeout";
    } else if (c instanceof ConnectException) {
      kind = "connect";
    } else if (c instanceof CancellationException) {
      kind = "aborted";
    } else if (c instanceof IOException) {
      kind = "io";
    } else {
      kind = "io";
    }
    errorDetail = WorkerMetrics.rootMessage(c);
    finish(kind, nanoClock.getAsLong());
  }

  /** The request ran past its deadline: fail it and stop reading. */
  void timeout() {
    abort("timeout");
  }

  /** Fails the exchange with {@code kind} and releases the connection. */
  synchronized void abort(String kind) {
    if (finished) {
      return;
    }
    finish(kind, nanoClock.getAsLong());
    if (subscription != null) {
      subscription.cancel();
    }
    if (sendFuture != null) {
      sendFuture.cancel(true);
    }
  }

  synchronized RequestRecord record() {
    return record;
  }

  synchronized String errorDetail() {
    return errorDetail;
  }

  WorkloadRequest request() {
    return request;
  }

  private void dispatch(long now) {
    if (event.length() == 0) {
      return;
    }
    String data = event.toString();
    event.setLength(0);
    if (data.equals("[DONE]")) {
      sawDone = true;
      return;
    }
    JsonNode o;
    try {
      o = JSON.readTree(data);
    } catch (IOException e) {
      streamError = true;
      errorDetail = "unparsable SSE event";
      return;
    }
    if (o.has("error") || "error".equals(o.path("object").asText())) {
      streamError = true;
      errorDetail = truncate(o.path("error").path("message").asText(o.path("message").asText("")));
      return;
    }
    if (o.has("type")) {
      messagesEvent(o, now);
      return;
    }
    for (JsonNode c : o.path("choices")) {
      JsonNode text = c.has("delta") ? c.path("delta").path("content") : c.path("text");
      JsonNode reasoning = c.path("delta").path("reasoning");
      boolean thought = reasoning.isTextual() && !reasoning.asText().isEmpty();
      if (thought) {
        content(now); // a reasoning model's thinking (vLLM's delta.reasoning) ends the wait, not the answer's text
      }
      if (text.isTextual() && !text.asText().isEmpty()) {
        if (!thought) {
          content(now);
        }
        if (answerIds != null) {
          readAnswerIds(text.asText());
        } else {
          appendAnswerText(text.asText());
        }
        break;
      }
    }
    JsonNode u = o.get("usage");
    if (u != null && u.isObject()) {
      promptTokens = u.path("prompt_tokens").asInt(-1);
      completionTokens = u.path("completion_tokens").asInt(-1);
      JsonNode cached = u.path("prompt_tokens_details").path("cached_tokens");
      cachedTokens = cached.isNumber() ? cached.asInt() : -1;
    }
  }

  /**
   * An Anthropic Messages stream's event: text deltas are the content, {@code message_delta} carries the final
   * usage (input without the cached part, beside it the cache read), {@code message_stop} ends it as {@code [DONE]}
   * ends an OpenAI stream.
   */
  private void messagesEvent(JsonNode o, long now) {
    switch (o.path("type").asText()) {
      case "content_block_delta" -> {
        JsonNode text = o.path("delta").path("text");
        if (text.isTextual() && !text.asText().isEmpty()) {
          content(now);
          appendAnswerText(text.asText());
        } else if (o.path("delta").path("thinking").isTextual()) {
          content(now); // a reasoning model's first tokens are its thinking: they end the wait, not the answer's text
        }
      }
      case "message_delta" -> {
        stopReason = o.path("delta").path("stop_reason").asText(null);
        JsonNode u = o.path("usage");
        if (u.isObject() && u.has("input_tokens")) {
          int read = u.path("cache_read_input_tokens").asInt(0);
          promptTokens = u.path("input_tokens").asInt() + read + u.path("cache_creation_input_tokens").asInt(0);
          cachedTokens = u.has("cache_read_input_tokens") ? read : -1;
          completionTokens = u.path("output_tokens").asInt(-1);
        }
      }
      case "message_stop" -> sawDone = true;
      default -> {
        // message_start (its usage is the prompt before the engine's outcome), block starts and stops, pings
      }
    }
  }

  private void content(long now) {
    if (firstContentNanos < 0) {
      firstContentNanos = now;
    } else {
      long gap = Math.max(0, (now - lastContentNanos) / 1000);
      itlMaxMicros = Math.max(itlMaxMicros, gap);
      synchronized (itl) {
        itl.recordValue(Math.min(gap, itl.getHighestTrackableValue()));
      }
    }
    lastContentNanos = now;
    contentChunks++;
  }

  private static final String TOKEN_ID = "token_id:";

  /** Reads {@code token_id:<id>} texts (vLLM's {@code return_tokens_as_token_ids} rendering) into the answer. */
  private void readAnswerIds(String text) {
    int at = 0;
    while (!answerUnreadable && at < text.length()) {
      if (!text.startsWith(TOKEN_ID, at)) {
        answerUnreadable = true;
        return;
      }
      int from = at + TOKEN_ID.length();
      int to = from;
      while (to < text.length() && to - from < 10 && Character.isDigit(text.charAt(to))) {
        to++;
      }
      if (to == from || answerIdsRead == answerIds.length) {
        answerUnreadable = true;
        return;
      }
      answerIds[answerIdsRead++] = (int) Math.min(Integer.MAX_VALUE, Long.parseLong(text, from, to, 10));
      at = to;
    }
  }

  /**
   * The scripted answer's token ids as the worker streamed them, or {@code null} when the request scripts no
   * answer or the stream's text was not {@code token_id:<id>} (a worker generating its own text).
   */
  synchronized int[] streamedAnswer() {
    return answerIds == null || answerUnreadable ? null : java.util.Arrays.copyOf(answerIds, answerIdsRead);
  }

  /** Keeps a scripted answer's streamed text, up to just past {@link #maxAnswerChars}. */
  private void appendAnswerText(String text) {
    if (answerText != null && answerText.length() <= maxAnswerChars) {
      answerText.append(text, 0, Math.min(text.length(), maxAnswerChars + 1 - answerText.length()));
    }
  }

  /** Whether a Messages answer ended with its tool call ({@code stop_reason: "tool_use"}). */
  synchronized boolean toolCallReceived() {
    return "tool_use".equals(stopReason);
  }

  /**
   * The scripted chat answer's text as streamed (cut past a bound far above the script's length), or {@code null}
   * when the request is not a chat request that scripts an answer.
   */
  synchronized String streamedAnswerText() {
    return answerText == null ? null : answerText.toString();
  }

  private void finish(String error, long endNanos) {
    if (finished) {
      return;
    }
    finished = true;
    if (timeoutTask != null) {
      timeoutTask.cancel(false);
    }
    long sent = (sentNanos - t0Nanos) / 1000;
    record = new RequestRecord(request.index(), request.id(), request.sessionId(), dueMicros, sent,
        firstContentNanos < 0 ? -1 : (firstContentNanos - sentNanos) / 1000,
        (endNanos - sentNanos) / 1000, status, error, servedBy, decisionId, promptTokens,
        cachedTokens, completionTokens, contentChunks, itlMaxMicros);
    onFinish.accept(this);
  }

  private static String truncate(String s) {
    return s.length() <= MAX_ERROR_CHARS ? s : s.substring(0, MAX_ERROR_CHARS);
  }
}
