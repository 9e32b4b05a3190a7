package dev.kvrouter.extproc.server;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.routing.RoundRobinPolicy;
import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.Status;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@code limits.max_buffered_body_bytes}: one cap on the request bodies all streams hold at once. Each body is
 * bounded by {@code max_body_bytes}; without the cap, slow uploads in FULL_DUPLEX_STREAMED mode (no timeout from
 * Envoy) or a burst of large bodies would hold that many times over.
 */
class RequestStreamBodyBudgetTest {

  static final int MAX_BODY = 64 * 1024;
  final BodyBudget budget = new BodyBudget(160 * 1024);
  final List<Runnable> offloaded = new ArrayList<>();
  final List<String> refused = new ArrayList<>();
  final InFlight inFlight = new InFlight(100, java.time.Duration.ofMinutes(1));
  final Router router;

  RequestStreamBodyBudgetTest() {
    WorkerRegistry registry = new WorkerRegistry();
    registry.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m")));
    router = new Router(registry, new RoundRobinPolicy(), Map.of(), System::nanoTime);
  }

  /** A stream and what it sent back. */
  final class Client {
    final List<ProcessingResponse> sent = new ArrayList<>();
    final RequestStream stream;

    Client(int inlineLimit) {
      ExtProcOptions o = ExtProcOptions.defaults();
      o = new ExtProcOptions(o.bind(), 0, MAX_BODY, o.tenantHeader(), BodySendMode.FULL_DUPLEX_STREAMED,
          BodySendMode.FULL_DUPLEX_STREAMED, 1, 1, inlineLimit, 1);
      stream = new RequestStream(RequestStreamTest.collecting(sent), RequestPath.of(router, new RequestListener() {
        @Override
        public void onRefused(String reason) {
          refused.add(reason);
        }
      }), o, offloaded::add, inFlight, budget);
    }

    /** Headers, then {@code bytes} of a chat body that has not ended. */
    Client uploading(int bytes) {
      stream.onNext(RequestStreamTest.headers(BodySendMode.FULL_DUPLEX_STREAMED, "POST", "/v1/chat/completions",
          false));
      stream.onNext(RequestStreamTest.body(prefix() + "x".repeat(bytes - prefix().length()), false));
      return this;
    }

    void finishUpload() {
      stream.onNext(RequestStreamTest.body("\"}]}", true));
    }

    int status() {
      return sent.stream().filter(ProcessingResponse::hasImmediateResponse)
          .mapToInt(r -> r.getImmediateResponse().getStatus().getCodeValue()).findFirst().orElse(0);
    }

    boolean routed() {
      return sent.stream().anyMatch(r -> r.hasRequestHeaders() && r.getRequestHeaders().hasResponse());
    }

    static String prefix() {
      return "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"";
    }
  }

  @Test
  void bodiesOverTheSharedBudgetAreRefusedAndEveryWayABodyEndsGivesItsBytesBack() {
    Client first = new Client(1 << 20).uploading(60 * 1024);
    Client second = new Client(1 << 20).uploading(60 * 1024);
    assertThat(budget.used()).as("two bodies under way").isEqualTo(120 * 1024);

    Client third = new Client(1 << 20).uploading(60 * 1024);
    assertThat(third.status()).as("over the budget").isEqualTo(503);
    assertThat(refused).containsExactly("body_budget");
    assertThat(budget.used()).as("the refused body holds nothing").isEqualTo(120 * 1024);

    first.finishUpload(); // its buffer grows to the body limit, then it is routed and its bytes are Envoy's again
    assertThat(first.routed()).isTrue();
    assertThat(budget.used()).isEqualTo(60 * 1024);

    second.stream.onError(Status.CANCELLED.asRuntimeException()); // the client left mid-upload
    assertThat(budget.used()).isZero();

    Client fourth = new Client(1 << 20).uploading(60 * 1024);
    fourth.stream.onCompleted(); // Envoy closed the stream mid-upload
    assertThat(budget.used()).isZero();

    Client oversize = new Client(1 << 20).uploading(60 * 1024);
    oversize.stream.onNext(RequestStreamTest.body("y".repeat(MAX_BODY), false)); // past max_body_bytes: 413
    assertThat(oversize.status()).isEqualTo(413);
    assertThat(budget.used()).isZero();
  }

  @Test
  void aBodyQueuedForARoutingThreadKeepsItsBytesUntilTheThreadIsDone() {
    Client queued = new Client(0).uploading(40 * 1024);
    queued.finishUpload();
    assertThat(offloaded).hasSize(1);
    assertThat(budget.used()).as("waiting for a routing thread, its buffer grown to the body limit")
        .isEqualTo(MAX_BODY);
    offloaded.remove(0).run();
    assertThat(queued.routed()).isTrue();
    assertThat(budget.used()).isZero();

    Client abandoned = new Client(0).uploading(40 * 1024);
    abandoned.finishUpload();
    abandoned.stream.onCompleted(); // Envoy gave up while it waited
    assertThat(budget.used()).as("dropped at the close, before any thread took it").isZero();
    offloaded.remove(0).run();
    assertThat(abandoned.routed()).isFalse();
    assertThat(budget.used()).isZero();
  }
}
