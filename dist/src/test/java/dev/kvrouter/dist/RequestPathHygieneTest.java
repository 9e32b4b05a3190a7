package dev.kvrouter.dist;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.ThrowableProxyUtil;
import ch.qos.logback.core.read.ListAppender;
import com.google.protobuf.ByteString;
import dev.kvrouter.extproc.decision.DecisionLog;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProtocolConfiguration;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.stub.StreamObserver;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;

/**
 * docs/operations.md: logs and decision records never carry prompt text, token ids, tenant ids or secrets. Every
 * field of every request below carries a marker; the requests go through the whole runtime (ext_proc over gRPC,
 * the model registry with a real tokenizer, the router, the decision log) with every logger at TRACE, and the
 * marker must appear in no log line, no decision record and no metric.
 */
class RequestPathHygieneTest {

  static final String M = "zqxmarker";
  static final Path QWEN3 = Path.of(System.getProperty("kvrouter.root", "..")).resolve(".cache/tokenizers/qwen3")
      .toAbsolutePath().normalize();

  record Exchange(List<ProcessingResponse> responses) {
    String immediateBody() {
      return responses.stream().filter(ProcessingResponse::hasImmediateResponse).findFirst()
          .map(r -> r.getImmediateResponse().getBody().toStringUtf8()).orElse("");
    }
  }

  static ProcessingRequest headers(String path) {
    HeaderMap.Builder h = HeaderMap.newBuilder();
    String[][] kvs = {{":method", "POST"}, {":path", path}, {"x-tenant-id", "tenant-" + M},
        {"authorization", "Bearer sk-" + M}, {"x-api-key", "key-" + M}, {"content-type", "application/json"}};
    for (String[] kv : kvs) {
      h.addHeaders(HeaderValue.newBuilder().setKey(kv[0]).setRawValue(ByteString.copyFromUtf8(kv[1])));
    }
    return ProcessingRequest.newBuilder()
        .setProtocolConfig(ProtocolConfiguration.newBuilder().setRequestBodyMode(BodySendMode.BUFFERED)
            .setResponseBodyMode(BodySendMode.STREAMED))
        .setRequestHeaders(HttpHeaders.newBuilder().setHeaders(h)).build();
  }

  /** One exchange: the request, and for a routed one a response with usage, so its records are written. */
  static Exchange send(ManagedChannel ch, String path, String body) throws InterruptedException {
    List<ProcessingResponse> got = new ArrayList<>();
    CountDownLatch answered = new CountDownLatch(1);
    CountDownLatch done = new CountDownLatch(1);
    StreamObserver<ProcessingRequest> in = ExternalProcessorGrpc.newStub(ch).process(new StreamObserver<>() {
      @Override
      public void onNext(ProcessingResponse r) {
        synchronized (got) {
          got.add(r);
        }
        if (r.hasImmediateResponse() || r.hasRequestBody()) {
          answered.countDown();
        }
        if (r.hasImmediateResponse() || r.hasResponseBody()) {
          done.countDown();
        }
      }

      @Override
      public void onError(Throwable t) {
        answered.countDown();
        done.countDown();
      }

      @Override
      public void onCompleted() {
        answered.countDown();
        done.countDown();
      }
    });
    in.onNext(headers(path));
    in.onNext(ProcessingRequest.newBuilder().setRequestBody(HttpBody.newBuilder()
        .setBody(ByteString.copyFromUtf8(body)).setEndOfStream(true)).build());
    assertThat(answered.await(30, TimeUnit.SECONDS)).as("an answer to %s", body).isTrue();
    boolean routed;
    synchronized (got) {
      routed = got.stream().noneMatch(ProcessingResponse::hasImmediateResponse);
    }
    if (routed) {
      in.onNext(ProcessingRequest.newBuilder().setResponseHeaders(HttpHeaders.newBuilder().setHeaders(
          HeaderMap.newBuilder().addHeaders(HeaderValue.newBuilder().setKey(":status")
              .setRawValue(ByteString.copyFromUtf8("200"))))).build());
      in.onNext(ProcessingRequest.newBuilder().setResponseBody(HttpBody.newBuilder().setEndOfStream(true)
          .setBody(ByteString.copyFromUtf8("{\"choices\":[{\"message\":{\"content\":\"" + M + "\"}}],"
              + "\"usage\":{\"prompt_tokens\":40,\"prompt_tokens_details\":{\"cached_tokens\":0}}}")))
          .build());
    }
    assertThat(done.await(30, TimeUnit.SECONDS)).as("the end of %s", body).isTrue();
    in.onCompleted();
    synchronized (got) {
      return new Exchange(List.copyOf(got));
    }
  }

  static String chat(String model, String extra) {
    return "{\"model\":\"" + model + "\",\"messages\":[{\"role\":\"system\",\"content\":\"sys " + M + "\"},"
        + "{\"role\":\"user\",\"name\":\"name-" + M + "\",\"content\":[{\"type\":\"text\",\"text\":\"user " + M
        + "\"}]}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"fn_" + M + "\",\"description\":\""
        + M + "\",\"parameters\":{\"type\":\"object\"}}}],\"cache_salt\":\"salt-" + M + "\",\"user\":\"" + M
        + "\"" + extra + "}";
  }

  @Test
  void noMarkerReachesLogsDecisionRecordsOrMetrics(@TempDir Path dir) throws Exception {
    Files.writeString(dir.resolve("workers.yaml"), "workers:\n  - {name: a, address: 127.0.0.1, port: 1, model: qwen}\n");
    Files.writeString(dir.resolve("secret"), "secret-" + M + "-0123456789abcdef\n");
    int ext = KvrouterRuntimeTest.freePort();
    int admin = KvrouterRuntimeTest.freePort();
    KvrouterConfig cfg = KvrouterConfig.parse("server: {ext_proc_port: " + ext + ", xds_port: "
        + KvrouterRuntimeTest.freePort() + ", admin_port: " + admin + "}\n"
        + "routing: {scrape: {enabled: false}}\n"
        + "tenancy: {secret_file: secret}\n"
        + "models:\n  - {name: qwen, tokenizer: " + QWEN3 + "}\n", "t");
    Logger root = (Logger) LoggerFactory.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
    Level level = root.getLevel();
    ListAppender<ILoggingEvent> logs = new ListAppender<>();
    logs.start();
    root.addAppender(logs);
    root.setLevel(Level.TRACE);
    // Logging.configure (run by other tests in this JVM) makes the records' logger non-additive
    Logger records = (Logger) LoggerFactory.getLogger(DecisionLog.LOGGER);
    Level recordsLevel = records.getLevel();
    if (!records.isAdditive()) {
      records.addAppender(logs);
    }
    records.setLevel(Level.INFO);
    KvrouterRuntime rt = KvrouterRuntime.start(cfg, dir, KvrouterRuntime.Mode.ALL);
    ManagedChannel ch = ManagedChannelBuilder.forAddress("127.0.0.1", ext).usePlaintext().build();
    List<String> answers = new ArrayList<>();
    try {
      assertThat(rt.models().await("qwen", java.time.Duration.ofSeconds(60)).fallback()).isNull();
      String chat = "/v1/chat/completions";
      String[][] requests = {
          {chat, chat("qwen", "")},
          {chat, chat("model-" + M, "")}, // unknown model
          {chat, chat("qwen", ",\"chat_template_kwargs\":{\"" + M + "\":1}")},
          {chat, chat("qwen", ",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"" + M + "\"}]}]")},
          {chat, chat("qwen", ",\"messages\":[{\"content\":\"" + M + "\"}]")}, // no role: template input error
          {chat, chat("qwen", ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"x" + M + "\"}}")},
          {chat, "{\"model\":\"qwen\",\"messages\":[{\"role\":\"user\",\"content\":\"" + M + "\"}], " + M + "}"},
          {chat, "{\"model\":\"qwen\",\"messages\":\"" + M + "\"}"},
          {chat, "{\"model\":\"qwen\",\"messages\":[{\"role\":\"user\",\"content\":\"" + M + "\\ud800\"}]}"},
          {"/v1/completions", "{\"model\":\"qwen\",\"prompt\":\"" + M + "\",\"cache_salt\":\"" + M + "\"}"},
          {"/v1/completions", "{\"model\":\"qwen\",\"prompt\":[987654321,123456789]}"},
          {"/v1/completions", "{\"model\":\"qwen\",\"prompt\":[987654321,\"" + M + "\"]}"},
          {"/v1/completions", "{\"model\":\"qwen\",\"prompt\":\"" + M + "\",\"max_tokens\":\"" + M + "\"}"},
      };
      for (String[] r : requests) {
        answers.add(send(ch, r[0], r[1]).immediateBody());
      }
      String metrics = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
          URI.create("http://127.0.0.1:" + admin + "/metrics")).build(), HttpResponse.BodyHandlers.ofString()).body();
      assertThat(metrics).doesNotContain(M).doesNotContain("987654321");
    } finally {
      ch.shutdownNow();
      rt.close();
      root.detachAppender(logs);
      root.setLevel(level);
      records.detachAppender(logs);
      records.setLevel(recordsLevel);
    }
    List<String> lines = new ArrayList<>();
    for (ILoggingEvent e : List.copyOf(logs.list)) {
      lines.add(e.getLoggerName() + " " + e.getFormattedMessage()
          + (e.getThrowableProxy() == null ? "" : " " + ThrowableProxyUtil.asString(e.getThrowableProxy())));
    }
    assertThat(lines).as("decision and outcome records were written")
        .anyMatch(l -> l.startsWith("kvrouter.decisions {\"event\":\"decision\"") && l.contains("\"chosen\":\"a\""))
        .anyMatch(l -> l.startsWith("kvrouter.decisions {\"event\":\"outcome\""));
    assertThat(lines).noneMatch(l -> l.contains(M)).noneMatch(l -> l.contains("987654321"));
    // The answers name the field at fault, never its value; only the 404 echoes the model name, as vLLM does.
    assertThat(answers).as("error answers to the client").noneMatch(a -> a.replace("model-" + M, "").contains(M))
        .anySatisfy(a -> assertThat(a).contains("\"code\":\"model_not_found\""))
        .anySatisfy(a -> assertThat(a).contains("\"param\":\"tool_choice\""));
  }
}
