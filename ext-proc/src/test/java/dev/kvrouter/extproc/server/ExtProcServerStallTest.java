package dev.kvrouter.extproc.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import dev.kvrouter.extproc.routing.RoutingPolicy;
import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.extproc.routing.Scoring;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The watchdog of {@code server.stall_ms}: Envoy puts no timeout on a FULL_DUPLEX_STREAMED exchange, so a router
 * whose routing threads fall behind must say so on its health, which its event loop keeps answering.
 */
@Timeout(60)
class ExtProcServerStallTest {

  /** A policy that holds the decision until released: routing that cannot keep up. */
  private static final class HeldPolicy implements RoutingPolicy {
    final CountDownLatch release = new CountDownLatch(1);

    @Override
    public String name() {
      return "held";
    }

    @Override
    public Choice choose(Scoring s) {
      try {
        release.await(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return new Choice(s.candidates().get(0), "held");
    }
  }

  @Test
  void healthSaysNotServingWhileARequestWaitsPastTheLimitForARoutingThreadAndServingOnceItDrains()
      throws Exception {
    WorkerRegistry registry = new WorkerRegistry();
    registry.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m")));
    HeldPolicy policy = new HeldPolicy();
    Router router = new Router(registry, policy, Map.of(), System::nanoTime);
    ExtProcOptions d = ExtProcOptions.defaults();
    // two routing threads (the least the server runs), every body routed off the event loop
    ExtProcOptions options = new ExtProcOptions("127.0.0.1", 0, 1 << 20, null, BodySendMode.BUFFERED,
        BodySendMode.STREAMED, 1, 2, 0, d.truthCheckEvery());
    ExtProcServer server = new ExtProcServer(options, RequestPath.of(router, null), Duration.ofMillis(300),
        BodyBudget.UNLIMITED).start();
    ManagedChannel ch = ManagedChannelBuilder.forAddress("127.0.0.1", server.port()).usePlaintext().build();
    List<CountDownLatch> answered = new ArrayList<>();
    try {
      HealthGrpc.HealthBlockingStub health = HealthGrpc.newBlockingStub(ch);
      assertThat(status(health)).isEqualTo(ServingStatus.SERVING);
      // The first holds its thread in the policy and the router's decision lock, the second its thread on that
      // lock: the third waits in the queue.
      for (int i = 0; i < 3; i++) {
        answered.add(send(ch, i));
      }
      await(() -> status(health) == ServingStatus.NOT_SERVING, "NOT_SERVING once the third waited 300 ms");
      assertThat(server.stalled()).isTrue();
      assertThat(server.serving()).as("the admin /health reads it").isFalse();
      assertThat(server.routingQueueWaitSeconds()).isGreaterThan(0.3);
      assertThat(server.stalls()).isEqualTo(1);

      policy.release.countDown();
      for (CountDownLatch a : answered) {
        assertThat(a.await(10, TimeUnit.SECONDS)).as("every request routed once the threads are free").isTrue();
      }
      await(() -> status(health) == ServingStatus.SERVING, "SERVING again once the queue drained");
      assertThat(server.stalled()).isFalse();
      assertThat(server.routingQueueWaitSeconds()).isZero();

      server.drain();
      await(() -> status(health) == ServingStatus.NOT_SERVING, "draining");
      Thread.sleep(100); // a few watchdog rounds: the drained server stays NOT_SERVING
      assertThat(status(health)).isEqualTo(ServingStatus.NOT_SERVING);
    } finally {
      policy.release.countDown();
      ch.shutdownNow();
      server.close();
    }
  }

  @Test
  void withoutALimitTheHealthIgnoresTheQueue() throws Exception {
    WorkerRegistry registry = new WorkerRegistry();
    registry.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m")));
    HeldPolicy policy = new HeldPolicy();
    ExtProcOptions d = ExtProcOptions.defaults();
    ExtProcOptions options = new ExtProcOptions("127.0.0.1", 0, 1 << 20, null, BodySendMode.BUFFERED,
        BodySendMode.STREAMED, 1, 2, 0, d.truthCheckEvery());
    ExtProcServer server = new ExtProcServer(options,
        RequestPath.of(new Router(registry, policy, Map.of(), System::nanoTime), null)).start();
    ManagedChannel ch = ManagedChannelBuilder.forAddress("127.0.0.1", server.port()).usePlaintext().build();
    try {
      for (int i = 0; i < 3; i++) {
        send(ch, i);
      }
      await(() -> server.routingQueueWaitSeconds() > 0.3, "a request queued 300 ms");
      assertThat(status(HealthGrpc.newBlockingStub(ch))).isEqualTo(ServingStatus.SERVING);
      assertThat(server.stalled()).isFalse();
    } finally {
      policy.release.countDown();
      ch.shutdownNow();
      server.close();
    }
  }

  private static ServingStatus status(HealthGrpc.HealthBlockingStub health) {
    return health.withDeadlineAfter(5, TimeUnit.SECONDS)
        .check(HealthCheckRequest.newBuilder().setService(ExternalProcessorGrpc.SERVICE_NAME).build()).getStatus();
  }

  /** One chat request in BUFFERED mode; the latch opens when the router answers its body. */
  private static CountDownLatch send(ManagedChannel ch, int i) {
    CountDownLatch answered = new CountDownLatch(1);
    StreamObserver<ProcessingRequest> in = ExternalProcessorGrpc.newStub(ch).process(new StreamObserver<>() {
      @Override
      public void onNext(ProcessingResponse r) {
        if (r.hasRequestBody() || r.hasImmediateResponse()) {
          answered.countDown();
        }
      }

      @Override
      public void onError(Throwable t) {}

      @Override
      public void onCompleted() {}
    });
    in.onNext(RequestStreamTest.headers(BodySendMode.BUFFERED, "POST", "/v1/chat/completions", false));
    in.onNext(RequestStreamTest.body("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q" + i + "\"}]}",
        true));
    return answered;
  }

  private static void await(BooleanSupplier condition, String what) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out waiting: " + what);
      }
      Thread.sleep(10);
    }
  }
}
