package dev.kvrouter.examples.loadgen;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.report.LatencyStats;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.workload.Prompt;
import dev.kvrouter.examples.workload.Segment;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.io.IOException;
import java.net.ConnectException;
import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Test;

/** SSE parsing and timing on a clock the test drives (lines are fed as the HTTP client would). */
class StreamingExchangeTest {

  private final AtomicLong now = new AtomicLong(1_000_000_000L);
  private final Histogram itl = LatencyStats.newMicrosHistogram();
  private final AtomicReference<RequestRecord> done = new AtomicReference<>();

  private StreamingExchange exchange(int status, Map<String, List<String>> headers) {
    WorkloadRequest r = new WorkloadRequest(3, "req-3", 500, "s", Prompt.tokens(List.of(new Segment(1, 4))), 3);
    now.set(1_000_000_000L); // every exchange is sent at the same instant of the test clock
    StreamingExchange ex = new StreamingExchange(r, r.arrivalMicros(), 1_000_000_000L - 2_000_000, now.get(), itl,
        e -> done.set(e.record()), now::get);
    ex.apply(info(status, headers));
    ex.onSubscribe(new Flow.Subscription() {
      @Override
      public void request(long n) {}

      @Override
      public void cancel() {}
    });
    return ex;
  }

  private void at(long millisAfterSend, StreamingExchange ex, String... lines) {
    now.set(1_000_000_000L + millisAfterSend * 1_000_000);
    for (String l : lines) {
      ex.onNext(l);
    }
  }

  @Test
  void timesTheFirstContentChunkAndTheGapsBetweenContentChunks() {
    StreamingExchange ex = exchange(200, Map.of("x-kvrouter-served-by", List.of("w7"),
        "x-kvrouter-decision", List.of("dec-1")));
    at(5, ex, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}", "");
    at(40, ex, ": keep-alive comment", "event: message", "data: {\"choices\":[{\"index\":0,\"text\":\" a\"}]}", "");
    at(65, ex, "data: {\"choices\":[{\"index\":0,\"text\":\" b\"}],", "data: \"usage\":null}", "");
    at(66, ex, "data: {\"choices\":[{\"index\":0,\"text\":\"\"}]}", ""); // empty: not a token
    at(100, ex, "data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\" c\"}}]}", "");
    at(101, ex, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3,"
        + "\"prompt_tokens_details\":{\"cached_tokens\":2}}}", "", "data: [DONE]", "");
    at(103, ex);
    ex.onComplete();
    RequestRecord r = done.get();
    assertThat(r).isEqualTo(new RequestRecord(3, "req-3", "s", 500, 2_000, 40_000, 103_000, 200, null, "w7", "dec-1",
        4, 2, 3, 3, 35_000));
    assertThat(itl.getTotalCount()).isEqualTo(2);
    // the histogram keeps 3 significant digits
    assertThat(itl.getMinValue()).isBetween(24_970L, 25_000L);
    assertThat(itl.getMaxValue()).isBetween(34_970L, 35_030L);
  }

  @Test
  void anAnthropicStreamIsTimedAtItsTextDeltasAndReadFromMessageDeltaUsage() {
    StreamingExchange ex = exchange(200, Map.of("x-kvrouter-served-by", List.of("w2")));
    // vLLM's converter sends message_start with the first token, its usage the whole prompt as input
    at(30, ex, "event: message_start", "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\","
        + "\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":40,\"output_tokens\":0}}}", "",
        "event: content_block_start", "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
        + "{\"type\":\"text\",\"text\":\"\"}}", "",
        "event: content_block_delta", "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
        + "{\"type\":\"text_delta\",\"text\":\" a\"}}", "");
    at(50, ex, "event: content_block_delta", "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
        + "{\"type\":\"text_delta\",\"text\":\" b\"}}", "");
    at(51, ex, "event: content_block_stop", "data: {\"type\":\"content_block_stop\",\"index\":0}", "",
        "event: message_delta", "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\","
        + "\"stop_sequence\":null},\"usage\":{\"input_tokens\":8,\"output_tokens\":2,\"cache_read_input_tokens\":32}}",
        "");
    at(52, ex, "event: message_stop", "data: {\"type\":\"message_stop\"}", "");
    ex.onComplete();
    assertThat(done.get()).isEqualTo(new RequestRecord(3, "req-3", "s", 500, 2_000, 30_000, 52_000, 200, null, "w2",
        null, 40, 32, 2, 2, 20_000));

    StreamingExchange cut = exchange(200, Map.of());
    at(10, cut, "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}",
        "");
    cut.onComplete();
    assertThat(done.get().error()).as("no message_stop").isEqualTo("incomplete");
    StreamingExchange err = exchange(200, Map.of());
    at(10, err, "event: error", "data: {\"type\":\"error\",\"error\":{\"type\":\"internal_error\",\"message\":\"died\"}}",
        "");
    err.onComplete();
    assertThat(done.get().error()).isEqualTo("stream_error");
    assertThat(err.errorDetail()).isEqualTo("died");
  }

  @Test
  void aStreamWithoutDoneIsIncompleteAndAnErrorEventIsAStreamError() {
    StreamingExchange ex = exchange(200, Map.of());
    at(10, ex, "data: {\"choices\":[{\"index\":0,\"text\":\" a\"}]}", "");
    ex.onComplete();
    assertThat(done.get().error()).isEqualTo("incomplete");
    assertThat(done.get().ttftMicros()).isEqualTo(10_000);
    assertThat(done.get().cachedTokens()).isEqualTo(-1);

    StreamingExchange err = exchange(200, Map.of());
    at(10, err, "data: {\"error\":{\"message\":\"engine died\",\"code\":500}}", "", "data: [DONE]", "");
    err.onComplete();
    assertThat(done.get().error()).isEqualTo("stream_error");
    assertThat(err.errorDetail()).isEqualTo("engine died");
  }

  @Test
  void nonOkStatusesKeepTheirStatusAndAShortBody() {
    StreamingExchange ex = exchange(503, Map.of());
    at(3, ex, "{\"error\":{\"message\":\"" + "x".repeat(500) + "\"}}");
    ex.onComplete();
    assertThat(done.get().error()).isEqualTo("http_503");
    assertThat(done.get().status()).isEqualTo(503);
    assertThat(done.get().e2eMicros()).isEqualTo(3_000);
    assertThat(ex.errorDetail()).hasSize(200);
  }

  @Test
  void transportFailuresAreClassifiedAndOnlyTheFirstEndCounts() {
    StreamingExchange ex = exchange(200, Map.of());
    at(7, ex);
    ex.fail(new CompletionException(new ConnectException("refused")));
    assertThat(done.get().error()).isEqualTo("connect");
    done.set(null);
    ex.onComplete(); // a late end changes nothing
    ex.timeout();
    assertThat(done.get()).isNull();
    assertThat(ex.record().error()).isEqualTo("connect");

    StreamingExchange t = exchange(200, Map.of());
    t.fail(new HttpTimeoutException("slow"));
    assertThat(done.get().error()).isEqualTo("timeout");
    StreamingExchange io = exchange(200, Map.of());
    io.onError(new IOException("reset"));
    assertThat(done.get().error()).isEqualTo("io");
    StreamingExchange late = exchange(200, Map.of());
    at(300, late);
    late.timeout();
    assertThat(done.get().error()).isEqualTo("timeout");
    assertThat(done.get().e2eMicros()).isEqualTo(300_000);
  }

  private static HttpResponse.ResponseInfo info(int status, Map<String, List<String>> headers) {
    return new HttpResponse.ResponseInfo() {
      @Override
      public int statusCode() {
        return status;
      }

      @Override
      public HttpHeaders headers() {
        return HttpHeaders.of(headers, (a, b) -> true);
      }

      @Override
      public HttpClient.Version version() {
        return HttpClient.Version.HTTP_1_1;
      }
    };
  }
}
