package dev.kvrouter.extproc.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import dev.kvrouter.extproc.decision.DecisionLog;
import dev.kvrouter.extproc.decision.DecisionMetrics;
import dev.kvrouter.extproc.decision.DecisionTracker;
import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.LoadTracker;
import dev.kvrouter.extproc.load.ScrapedLoadSource;
import dev.kvrouter.extproc.load.WorkerHealth;
import dev.kvrouter.extproc.routing.Decision;
import dev.kvrouter.extproc.routing.ModelRouting;
import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.extproc.routing.RoutingConfig;
import dev.kvrouter.extproc.routing.RoutingPolicy;
import dev.kvrouter.extproc.routing.Scoring;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.config.core.v3.Metadata;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpTrailers;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProtocolConfiguration;
import io.grpc.ForwardingServerCallListener;
import io.grpc.ManagedChannel;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.MetadataUtils;
import io.grpc.stub.StreamObserver;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The ext_proc state machine under the message orders Envoy may send and many it should not: seeded random scripts
 * (request headers, body chunks in every body mode and end_of_stream placement, trailers, response phases on the
 * routing stream or on an observer stream, cancellation and client errors anywhere) run concurrently against the
 * real server over gRPC's in-process transport, with the real decision tracker and load ledger behind it. Once
 * every stream is over, nothing may be left held: no body bytes, no reservation, no decision waiting, and every
 * routed decision ended exactly once. A failure names the seed and the stream's script; {@code -Dextproc.seed=N}
 * replays it.
 */
@Timeout(60)
class ExtProcStreamPropertyTest {

  static final long SEED = Long.getLong("extproc.seed", 20261202L);
  static final int STREAMS = 400;
  static final int MAX_BODY = 8 * 1024;
  /** In every prompt: an error answer must never carry it back. */
  static final String SECRET = "SECRET-PROMPT-TEXT";
  static final ObjectMapper JSON = new ObjectMapper();

  final WorkerRegistry registry = new WorkerRegistry();
  /** Added to the clock of the ledger and the tracker, to see what their expiry drops. */
  final AtomicLong skew = new AtomicLong();
  final LongSupplier clock = () -> System.nanoTime() + skew.get();
  final LoadLedger ledger = new LoadLedger(clock, TimeUnit.SECONDS.toNanos(300), 100_000);
  final SimpleMeterRegistry meters = new SimpleMeterRegistry();
  final DecisionTracker tracker;
  final BodyBudget budget = new BodyBudget(6 * 1024);
  /** Routed decisions by seq, with how many times each was ended. */
  final Map<Long, AtomicInteger> ends = new ConcurrentHashMap<>();
  final Map<Long, Decision> routed = new ConcurrentHashMap<>();
  final List<String> violations = new CopyOnWriteArrayList<>();
  final List<Throwable> escaped = new CopyOnWriteArrayList<>();

  ExtProcStreamPropertyTest() {
    registry.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m"), Worker.simple("b", "10.0.0.2", 8000, "m")));
    // no ejections: a random 5xx must not turn the fleet away and leave nothing routed
    WorkerHealth health = new WorkerHealth(System::nanoTime, 1_000_000, 1_000_000, 0);
    tracker = new DecisionTracker(ledger, health, new DecisionLog(line -> { }, Clock.systemUTC(), 4, true),
        new DecisionMetrics(meters), clock, 100_000, TimeUnit.SECONDS.toNanos(300));
  }

  /** The tracker, behind a count of each decision's announcements and ends. */
  RequestListener counting() {
    return (RequestListener) java.lang.reflect.Proxy.newProxyInstance(RequestListener.class.getClassLoader(),
        new Class<?>[] {RequestListener.class}, (proxy, method, args) -> {
          if (method.getName().equals("onDecision")) {
            announced((Decision) args[0]);
          } else if (method.getName().equals("onEnd")) {
            ended((Decision) args[0]);
          }
          try {
            return method.invoke(tracker, args);
          } catch (java.lang.reflect.InvocationTargetException e) {
            throw e.getCause();
          }
        });
  }

  private void announced(Decision d) {
    if (d.routed() && routed.putIfAbsent(d.seq(), d) != null) {
      violations.add("decision " + d.id() + " announced twice");
    }
    ends.putIfAbsent(d.seq(), new AtomicInteger());
  }

  private void ended(Decision d) {
    AtomicInteger n = ends.get(d.seq());
    if (n == null) {
      violations.add("decision " + d.id() + " ended without being announced");
    } else if (n.incrementAndGet() > 1 && d.routed()) {
      violations.add("decision " + d.id() + " ended " + n.get() + " times");
    }
  }

  /** Records what escapes the service's callbacks: gRPC would close the call with UNKNOWN. */
  final class Escapes implements ServerInterceptor {
    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, io.grpc.Metadata headers,
        ServerCallHandler<Q, R> next) {
      return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(next.startCall(call, headers)) {
        @Override
        public void onMessage(Q message) {
          guard(() -> super.onMessage(message));
        }

        @Override
        public void onHalfClose() {
          guard(super::onHalfClose);
        }

        @Override
        public void onCancel() {
          guard(super::onCancel);
        }

        private void guard(Runnable r) {
          try {
            r.run();
          } catch (RuntimeException | Error e) {
            escaped.add(e);
            throw e;
          }
        }
      };
    }
  }

  @Test
  void everyStreamEndsAndLeavesNothingHeldWhateverEnvoySends() throws Exception {
    // Deciding takes a few milliseconds now and then, so requests queue for the routing threads and Envoy gives up
    // on some while they wait or while they are decided
    AtomicInteger decisions = new AtomicInteger();
    RoutingPolicy slow = new RoutingPolicy() {
      @Override
      public String name() {
        return "slow";
      }

      @Override
      public Choice choose(Scoring sc) {
        int n = decisions.incrementAndGet();
        if (n % 3 == 0) {
          try {
            Thread.sleep(n % 10 == 0 ? 20 : 2);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        }
        return new Choice(sc.candidates().get(n % sc.candidates().size()), "slow");
      }
    };
    Router router = Router.builder(registry)
        .policies(Map.of("slow", slow))
        .config(new RoutingConfig(ModelRouting.defaults("slow"), Map.of(), 16, 64, 64))
        .load(new LoadTracker(ledger, ScrapedLoadSource.NONE, System::nanoTime, 1))
        .build();
    // routing threads for bodies over 300 bytes, so both the inline and the queued paths are taken
    ExtProcOptions options = new ExtProcOptions("127.0.0.1", 0, MAX_BODY, "x-tenant-id", BodySendMode.BUFFERED,
        BodySendMode.STREAMED, 1, 2, 300, 2);
    String name = "extproc-property-" + SEED;
    ExtProcServer server = new ExtProcServer(options, RequestPath.of(router, counting()), Duration.ZERO, budget)
        .start(InProcessServerBuilder.forName(name).intercept(new Escapes()));
    ManagedChannel channel = InProcessChannelBuilder.forName(name).directExecutor().build();
    ExecutorService clients = Executors.newFixedThreadPool(6);
    List<Script> scripts = new ArrayList<>();
    try {
      for (int i = 0; i < STREAMS; i++) {
        scripts.add(new Script(i, new Random(SEED * 1_000_003L + i)));
      }
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
      for (Script s : scripts) {
        clients.execute(() -> s.run(channel, deadline));
      }
      clients.shutdown();
      assertThat(clients.awaitTermination(20, TimeUnit.SECONDS)).as("every script ran").isTrue();
      for (Script s : scripts) {
        assertThat(s.closed.await(5, TimeUnit.SECONDS)).as("stream ended: %s", s).isTrue();
        if (s.observerClosed != null) {
          assertThat(s.observerClosed.await(5, TimeUnit.SECONDS)).as("observer stream ended: %s", s).isTrue();
        }
      }
      // a request Envoy gave up on may still be computing on a routing thread: its end comes when that is done
      await(() -> budget.used() == 0 && unended() == server.inFlight().pending(), 5);

      assertThat(escaped).as("exceptions that escaped to gRPC (UNKNOWN to Envoy)").isEmpty();
      assertThat(violations).isEmpty();
      for (Script s : scripts) {
        s.check();
      }
      assertThat(budget.used()).as("buffered body bytes").isZero();
      assertThat(meters.find("kvrouter.requests.refused").tag("reason", "internal_error").counter())
          .as("the router's own failures").isNull();

      // Left held by design: decisions whose routing stream closed (cleanly) unclaimed, waiting for a late
      // observer. They end after the grace period once the router has seen that routing streams close at the
      // exchange's end; until then (an observer here followed a response whose routing stream closed first) only
      // the ledger's and InFlight's expiry drop them.
      InFlight inFlight = server.inFlight();
      assertThat(inFlight.pending()).isEqualTo(unended());
      assertThat(inFlight.orphansWaiting()).as("claimed ones leave the queue at its next round")
          .isGreaterThanOrEqualTo((int) unended());
      assertThat(ledger.liveReservations()).isEqualTo(unended());
      if (inFlight.closesAtTheEnd()) {
        inFlight.endOrphans(System.nanoTime() + InFlight.ORPHAN_GRACE_NANOS, InFlight.ORPHAN_GRACE_NANOS);
        assertThat(unended()).as("routed, never ended, past the orphans' grace").isZero();
      }
      inFlight.endOrphans(System.nanoTime(), 0);
      long waiting = inFlight.pending();
      assertThat(inFlight.orphansWaiting()).isGreaterThanOrEqualTo((int) waiting);
      assertThat((long) ledger.liveReservations()).isEqualTo(unended()).isEqualTo(waiting);
      assertThat((long) tracker.tracking()).isEqualTo(waiting);
      skew.set(TimeUnit.SECONDS.toNanos(301));
      assertThat((long) ledger.sweep()).as("expired by design").isEqualTo(waiting);
      assertThat((long) tracker.sweep()).isEqualTo(waiting);
      assertThat(ledger.liveReservations()).isZero();
      assertThat(ledger.totals()).containsOnly(0L);

      // every routed decision that ended has exactly one outcome in the metrics
      long outcomes = meters.find("kvrouter.request.duration").timers().stream().mapToLong(Timer::count).sum();
      assertThat(outcomes).isEqualTo(routed.size() - waiting);
      assertThat(routed).as("the property exercised routing").hasSizeGreaterThan(STREAMS / 10);
    } finally {
      clients.shutdownNow();
      channel.shutdownNow();
      server.close();
    }
  }

  private long unended() {
    return routed.keySet().stream().filter(seq -> ends.get(seq).get() == 0).count();
  }

  private static void await(BooleanSupplier condition, int seconds) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    while (!condition.getAsBoolean() && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
  }

  enum BodyKind { COMPLETIONS, CHAT, INVALID_JSON, OVERSIZED, EMPTY, UNKNOWN_MODEL, NOT_AN_OBJECT }

  enum Ending { HALF_CLOSE, CANCEL, CLIENT_ERROR }

  /** One stream's plan, drawn from its own seeded generator; {@link #toString} is the replayable description. */
  final class Script {
    final int index;
    final Random rnd;
    final BodySendMode mode;
    final String method;
    final String path;
    final boolean tenant;
    final BodyKind kind;
    final boolean stream;
    final List<ProcessingRequest> request = new ArrayList<>();
    final List<ProcessingRequest> response = new ArrayList<>();
    final boolean responseOnObserver;
    /**
     * The routing filter sees the response phases too, besides the observer: a config that leaves the routing
     * filter's {@code response_header_mode} at its default, SEND.
     */
    final boolean responseOnBoth;
    final boolean closeEarly;
    final int cutAt;
    boolean perturbed;
    final Ending ending;
    final List<String> log = Collections.synchronizedList(new ArrayList<>());
    /** What the routing stream was sent, in order. */
    final List<ProcessingRequest> sent = new CopyOnWriteArrayList<>();
    final List<ProcessingResponse> answers = new CopyOnWriteArrayList<>();
    final CountDownLatch closed = new CountDownLatch(1);
    volatile Status status;
    CountDownLatch observerClosed;
    volatile Status observerStatus;

    Script(int index, Random rnd) {
      this.index = index;
      this.rnd = rnd;
      BodySendMode[] modes = {BodySendMode.BUFFERED, BodySendMode.FULL_DUPLEX_STREAMED, BodySendMode.STREAMED, null};
      mode = modes[rnd.nextInt(10) < 4 ? 0 : rnd.nextInt(10) < 7 ? 1 : 2 + rnd.nextInt(2)];
      int p = rnd.nextInt(20);
      method = p < 17 ? "POST" : "GET";
      kind = BodyKind.values()[rnd.nextInt(10) < 6 ? rnd.nextInt(2) : rnd.nextInt(BodyKind.values().length)];
      path = p < 17 ? (kind == BodyKind.CHAT || rnd.nextBoolean() && kind != BodyKind.COMPLETIONS
          ? "/v1/chat/completions" : "/v1/completions")
          : p == 17 ? "/v1/models" : p == 18 ? "/v1/responses/resp_1" : "/v1/embeddings";
      tenant = rnd.nextInt(5) == 0;
      stream = rnd.nextBoolean();
      responseOnObserver = rnd.nextInt(3) > 0;
      buildRequest();
      buildResponse();
      perturb();
      int total = request.size() + response.size();
      // cut anywhere, or right after the request (Envoy giving up while the request is routed)
      int cut = rnd.nextInt(6);
      cutAt = cut == 0 ? rnd.nextInt(total + 1) : cut == 1 ? request.size() : total;
      ending = rnd.nextInt(5) == 0 ? Ending.values()[1 + rnd.nextInt(2)] : Ending.HALF_CLOSE;
      responseOnBoth = responseOnObserver && rnd.nextInt(6) == 0;
      closeEarly = rnd.nextInt(8) == 0;
    }

    private String body() {
      String prompt = SECRET + "-" + index + " " + "w".repeat(rnd.nextInt(3) == 0 ? 400 + rnd.nextInt(600) : 10);
      String s = stream ? ",\"stream\":true" : "";
      return switch (kind) {
        case COMPLETIONS -> "{\"model\":\"m\",\"prompt\":\"" + prompt + "\"" + s + "}";
        case CHAT -> "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"" + prompt + "\"}]" + s + "}";
        case INVALID_JSON -> "{\"model\":\"m\",\"prompt\":\"" + prompt + "\" " + prompt;
        case OVERSIZED -> "{\"model\":\"m\",\"prompt\":\"" + prompt + "x".repeat(MAX_BODY) + "\"}";
        case EMPTY -> "";
        case UNKNOWN_MODEL -> "{\"model\":\"" + SECRET.substring(0, 3) + "\",\"prompt\":\"" + prompt + "\"}";
        case NOT_AN_OBJECT -> "[\"" + prompt + "\"]";
      };
    }

    private void buildRequest() {
      HeaderMap.Builder h = HeaderMap.newBuilder();
      List<String[]> kv = new ArrayList<>(List.of(new String[] {":method", method}, new String[] {":path", path}));
      if (rnd.nextInt(4) > 0) {
        kv.add(new String[] {"x-request-id", "req-" + rnd.nextInt(STREAMS / 4)}); // some reused on purpose
      }
      if (tenant) {
        kv.add(new String[] {"x-tenant-id", "t" + rnd.nextInt(3)});
      }
      for (String[] e : kv) {
        h.addHeaders(HeaderValue.newBuilder().setKey(e[0]).setRawValue(ByteString.copyFromUtf8(e[1])));
      }
      byte[] b = body().getBytes(java.nio.charset.StandardCharsets.UTF_8);
      boolean trailers = rnd.nextInt(4) == 0;
      boolean noBody = b.length == 0 && rnd.nextBoolean();
      ProcessingRequest.Builder headers = ProcessingRequest.newBuilder()
          .setRequestHeaders(HttpHeaders.newBuilder().setHeaders(h).setEndOfStream(noBody && !trailers));
      if (mode != null) {
        headers.setProtocolConfig(ProtocolConfiguration.newBuilder().setRequestBodyMode(mode)
            .setResponseBodyMode(mode == BodySendMode.FULL_DUPLEX_STREAMED ? mode : BodySendMode.STREAMED));
      }
      request.add(headers.build());
      if (!noBody) {
        // BUFFERED: one message; the streamed modes: up to four chunks, end_of_stream on the last, on an empty
        // chunk after it, or on none (trailers follow)
        int chunks = mode == BodySendMode.BUFFERED ? 1 : 1 + rnd.nextInt(4);
        boolean emptyLast = mode != BodySendMode.BUFFERED && rnd.nextInt(4) == 0;
        int off = 0;
        for (int c = 0; c < chunks; c++) {
          int end = c == chunks - 1 ? b.length : off + rnd.nextInt(b.length - off + 1);
          boolean last = c == chunks - 1 && !emptyLast;
          request.add(body(ByteString.copyFrom(b, off, end - off), last && !trailers, false));
          off = end;
        }
        if (emptyLast) {
          request.add(body(ByteString.EMPTY, !trailers, false));
        }
      }
      if (trailers) {
        request.add(ProcessingRequest.newBuilder().setRequestTrailers(HttpTrailers.getDefaultInstance()).build());
      }
    }

    private void buildResponse() {
      int status = rnd.nextInt(8) == 0 ? (rnd.nextBoolean() ? 500 : 400) : 200;
      boolean headersOnly = rnd.nextInt(10) == 0;
      HeaderMap h = HeaderMap.newBuilder().addHeaders(HeaderValue.newBuilder().setKey(":status")
          .setRawValue(ByteString.copyFromUtf8(Integer.toString(status)))).build();
      response.add(ProcessingRequest.newBuilder()
          .setResponseHeaders(HttpHeaders.newBuilder().setHeaders(h).setEndOfStream(headersOnly)).build());
      if (headersOnly) {
        return;
      }
      int chunks = stream ? 1 + rnd.nextInt(5) : 1;
      for (int c = 0; c < chunks; c++) {
        boolean last = c == chunks - 1;
        String text = last
            ? "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,"
                + "\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\ndata: [DONE]\n\n"
            : "data: {\"choices\":[{\"text\":\"t" + c + "\"}]}\n\n";
        boolean trailers = last && rnd.nextInt(8) == 0;
        response.add(body(ByteString.copyFromUtf8(text), last && !trailers, true));
        if (trailers) {
          response.add(ProcessingRequest.newBuilder().setResponseTrailers(HttpTrailers.getDefaultInstance()).build());
        }
      }
    }

    /** Out-of-order, repeated and missing messages, in one stream in three. */
    private void perturb() {
      for (int n = 0; rnd.nextInt(3) == 0 && n < 3; n++) {
        perturbOnce();
      }
    }

    private void perturbOnce() {
      perturbed = true;
      List<ProcessingRequest> target = rnd.nextBoolean() || response.size() < 2 ? request : response;
      if (target.isEmpty()) {
        return;
      }
      switch (rnd.nextInt(4)) {
        case 0 -> target.add(target.get(rnd.nextInt(target.size()))); // a phase again
        case 1 -> target.remove(rnd.nextInt(target.size())); // a phase missing
        case 2 -> Collections.swap(target, rnd.nextInt(target.size()), rnd.nextInt(target.size()));
        default -> request.add(rnd.nextInt(request.size() + 1), response.get(0)); // a response phase early
      }
    }

    private ProcessingRequest body(ByteString b, boolean eos, boolean ofResponse) {
      HttpBody body = HttpBody.newBuilder().setBody(b).setEndOfStream(eos).build();
      ProcessingRequest.Builder r = ProcessingRequest.newBuilder();
      return (ofResponse ? r.setResponseBody(body) : r.setRequestBody(body)).build();
    }

    void run(ManagedChannel channel, long deadline) {
      try {
        play(channel, deadline);
      } catch (RuntimeException | InterruptedException e) {
        violations.add("script " + this + " failed: " + e);
      }
    }

    private void play(ManagedChannel channel, long deadline) throws InterruptedException {
      StreamObserver<ProcessingRequest> in = ExternalProcessorGrpc.newStub(channel).process(recorder(answers, log,
          s -> {
            status = s;
            closed.countDown();
          }));
      int sent = 0;
      for (ProcessingRequest r : request) {
        if (sent++ == cutAt) {
          break;
        }
        in.onNext(r);
        this.sent.add(r);
        log.add("> " + r.getRequestCase());
        if (rnd.nextInt(3) == 0) {
          awaitAnswers(sent, deadline); // Envoy waits for the answer to a phase before the next, in most modes
        }
      }
      String decision = null;
      if (sent <= cutAt && !response.isEmpty()) {
        awaitAnswers(request.size(), deadline);
        decision = decisionId();
      }
      StreamObserver<ProcessingRequest> observer = null;
      if (decision != null && responseOnObserver) {
        observerClosed = new CountDownLatch(1);
        List<ProcessingResponse> ignored = new CopyOnWriteArrayList<>();
        io.grpc.Metadata role = new io.grpc.Metadata();
        role.put(ExtProcServer.ROLE_HEADER, "observe");
        observer = ExternalProcessorGrpc.newStub(channel)
            .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(role))
            .process(recorder(ignored, log, s -> {
              observerStatus = s;
              observerClosed.countDown();
            }));
      }
      // An Envoy whose routing filter does not ask for response trailers closes the routing stream once the
      // request phases are done, before the response reaches the observer
      boolean closedEarly = observer != null && !responseOnBoth && closeEarly;
      if (closedEarly) {
        end(in);
      }
      boolean first = true;
      for (ProcessingRequest r : response) {
        if (sent++ >= cutAt) {
          break;
        }
        if (observer != null) {
          if (first) {
            r = r.toBuilder().setMetadataContext(Metadata.newBuilder().putFilterMetadata(EnvoyMessages.LB_NAMESPACE,
                Struct.newBuilder().putFields(Headers.DECISION, Value.newBuilder().setStringValue(decision).build())
                    .build())).build();
          }
          observer.onNext(r);
          log.add("observer> " + r.getRequestCase());
        }
        if (observer == null || responseOnBoth) {
          in.onNext(r);
          this.sent.add(r);
          log.add("> " + r.getRequestCase());
        }
        first = false;
      }
      // the routing stream closes at the exchange's end, the observer's stream before or after it
      boolean observerFirst = rnd.nextBoolean();
      if (observer != null && observerFirst) {
        endObserver(observer);
      }
      if (!closedEarly) {
        end(in);
      }
      if (observer != null && !observerFirst) {
        endObserver(observer);
      }
    }

    private void end(StreamObserver<ProcessingRequest> in) throws InterruptedException {
      switch (ending) {
        case HALF_CLOSE -> {
          // Envoy closes the stream once it has every answer it waits for, or at once when it gave up on the
          // exchange (a script cut short); the wait is bounded well above a routing thread's (the first requests
          // also wait for the classes to load)
          long until = System.nanoTime() + (cut() ? 0 : TimeUnit.SECONDS.toNanos(2));
          while (!unanswered().isEmpty() && System.nanoTime() < until) {
            Thread.sleep(1);
          }
          in.onCompleted();
        }
        case CANCEL -> ((ClientCallStreamObserver<ProcessingRequest>) in).cancel("client left", null);
        case CLIENT_ERROR -> in.onError(Status.UNAVAILABLE.withDescription("reset").asRuntimeException());
      }
      log.add("ended " + ending);
    }

    private void endObserver(StreamObserver<ProcessingRequest> observer) {
      if (rnd.nextInt(5) == 0) {
        ((ClientCallStreamObserver<ProcessingRequest>) observer).cancel("client left", null);
        log.add("observer cancelled");
      } else {
        observer.onCompleted();
        log.add("observer half-closed");
      }
    }

    private void awaitAnswers(int n, long deadline) throws InterruptedException {
      long until = Math.min(deadline, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(20));
      while (answers.size() < n && !immediate() && closed.getCount() > 0 && System.nanoTime() < until) {
        Thread.sleep(1);
      }
    }

    private boolean immediate() {
      return answers.stream().anyMatch(ProcessingResponse::hasImmediateResponse);
    }

    /** The decision id the router set on the request, as Envoy would forward it to the observer. */
    private String decisionId() {
      for (ProcessingResponse a : answers) {
        var common = a.hasRequestHeaders() ? a.getRequestHeaders().getResponse()
            : a.hasRequestBody() ? a.getRequestBody().getResponse() : null;
        if (common == null) {
          continue;
        }
        for (var h : common.getHeaderMutation().getSetHeadersList()) {
          if (h.getHeader().getKey().equals(Headers.DECISION)) {
            return h.getHeader().getRawValue().toStringUtf8();
          }
        }
      }
      return null;
    }

    /** What must hold of this stream once it is over. */
    void check() throws Exception {
      Status s = status;
      assertThat(s).as("stream closed: %s", this).isNotNull();
      assertThat(s.getCode()).as("how the stream closed: %s", this)
          .isIn(Status.Code.OK, Status.Code.CANCELLED);
      if (ending == Ending.HALF_CLOSE) {
        assertThat(s.getCode()).as("a half-closed stream is completed by the server: %s", this)
            .isEqualTo(Status.Code.OK);
      }
      if (observerStatus != null) {
        assertThat(observerStatus.getCode()).as("observer: %s", this).isIn(Status.Code.OK, Status.Code.CANCELLED);
      }
      List<ProcessingResponse> immediates = answers.stream().filter(ProcessingResponse::hasImmediateResponse).toList();
      assertThat(immediates).as("at most one immediate response: %s", this).hasSizeLessThanOrEqualTo(1);
      for (ProcessingResponse a : immediates) {
        var r = a.getImmediateResponse();
        String text = r.getBody().toStringUtf8();
        assertThat(text).as("an error answer never echoes the prompt: %s", this).doesNotContain(SECRET);
        JsonNode error = JSON.readTree(text).path("error");
        assertThat(error.path("message").isTextual()).as("OpenAI error shape %s: %s", text, this).isTrue();
        assertThat(error.path("type").isTextual()).as("OpenAI error shape %s: %s", text, this).isTrue();
        assertThat(error.path("code").isTextual()).as("OpenAI error shape %s: %s", text, this).isTrue();
        assertThat(error.has("param")).as("OpenAI error shape %s: %s", text, this).isTrue();
        int code = r.getStatus().getCodeValue();
        assertThat(code).as("an error status: %s", this).isBetween(400, 599);
        assertThat(expectedStatuses(error.path("code").asText())).as("status of %s: %s", text, this).contains(code);
        assertThat(r.getHeaders().getSetHeadersList()).as("content-type: %s", this)
            .anyMatch(h -> h.getHeader().getKey().equals("content-type")
                && h.getHeader().getRawValue().toStringUtf8().equals("application/json"));
        int i = answers.indexOf(a);
        assertThat(answers.subList(i + 1, answers.size())).as("nothing after an immediate response: %s", this)
            .isEmpty();
      }
      if (!sent.isEmpty() && (sent.get(0).hasRequestBody() || sent.get(0).hasRequestTrailers())) {
        assertThat(immediates).as("a request phase before the headers has no path: it goes on unrouted: %s", this)
            .isEmpty();
      }
      if (ending == Ending.HALF_CLOSE && !cut()) {
        assertThat(unanswered()).as("phases Envoy waits on, never answered: %s", this).isEmpty();
      }
      if (legalAndWhole() && mode == BodySendMode.BUFFERED && kind != BodyKind.COMPLETIONS && kind != BodyKind.CHAT
          && method.equals("POST") && path.startsWith("/v1/c")) {
        assertThat(immediates).as("a bad body is refused: %s", this).hasSize(1);
      }
    }

    /**
     * The phases sent on the routing stream that Envoy waits for an answer to and got none: every phase it sent,
     * unless an immediate response ended the exchange, except a FULL_DUPLEX_STREAMED request's headers and body
     * while that body has not ended (they are answered once it has).
     */
    List<ProcessingRequest.RequestCase> unanswered() {
      if (immediate()) {
        return List.of();
      }
      boolean requestEnded = sent.stream().anyMatch(r -> r.hasRequestTrailers()
          || r.hasRequestBody() && r.getRequestBody().getEndOfStream()
          || r.hasRequestHeaders() && r.getRequestHeaders().getEndOfStream());
      boolean fullDuplex = mode == BodySendMode.FULL_DUPLEX_STREAMED;
      List<ProcessingRequest.RequestCase> missing = new ArrayList<>();
      for (ProcessingRequest r : sent) {
        ProcessingRequest.RequestCase c = r.getRequestCase();
        boolean held = fullDuplex && !requestEnded
            && (c == ProcessingRequest.RequestCase.REQUEST_HEADERS || c == ProcessingRequest.RequestCase.REQUEST_BODY);
        if (!held && !missing.contains(c) && answers.stream().noneMatch(a -> a.getResponseCase().getNumber()
            == answerCase(c))) {
          missing.add(c);
        }
      }
      return missing;
    }

    private static int answerCase(ProcessingRequest.RequestCase c) {
      return switch (c) {
        case REQUEST_HEADERS -> ProcessingResponse.ResponseCase.REQUEST_HEADERS.getNumber();
        case REQUEST_BODY -> ProcessingResponse.ResponseCase.REQUEST_BODY.getNumber();
        case REQUEST_TRAILERS -> ProcessingResponse.ResponseCase.REQUEST_TRAILERS.getNumber();
        case RESPONSE_HEADERS -> ProcessingResponse.ResponseCase.RESPONSE_HEADERS.getNumber();
        case RESPONSE_BODY -> ProcessingResponse.ResponseCase.RESPONSE_BODY.getNumber();
        case RESPONSE_TRAILERS -> ProcessingResponse.ResponseCase.RESPONSE_TRAILERS.getNumber();
        default -> -1;
      };
    }

    private boolean cut() {
      return cutAt < request.size() + response.size();
    }

    private boolean legalAndWhole() {
      return !perturbed && !cut() && ending == Ending.HALF_CLOSE;
    }

    private List<Integer> expectedStatuses(String code) {
      return switch (code) {
        case "invalid_request" -> List.of(400);
        case "unknown_url" -> List.of(404);
        case "request_too_large" -> List.of(413);
        case "model_not_found" -> List.of(404);
        case "router_overloaded", "no_eligible_worker" -> List.of(503);
        case "all_workers_busy" -> List.of(429);
        case "internal_error" -> List.of(500);
        default -> List.of();
      };
    }

    @Override
    public String toString() {
      return "seed " + SEED + " stream " + index + " [" + mode + " " + method + " " + path + " " + kind
          + (stream ? " stream" : "") + (tenant ? " tenant" : "") + (responseOnObserver ? " observer" : "")
          + (responseOnBoth ? " both" : "") + (closeEarly ? " early" : "")
          + " cut@" + cutAt + " " + ending + "] " + log + " answers " + answers.stream()
          .map(a -> a.getResponseCase().toString()).toList() + " status " + status;
    }
  }

  private static StreamObserver<ProcessingResponse> recorder(List<ProcessingResponse> into, List<String> log,
      java.util.function.Consumer<Status> closed) {
    return new StreamObserver<>() {
      @Override
      public void onNext(ProcessingResponse r) {
        into.add(r);
      }

      @Override
      public void onError(Throwable t) {
        log.add("< error " + Status.fromThrowable(t).getCode());
        closed.accept(Status.fromThrowable(t));
      }

      @Override
      public void onCompleted() {
        log.add("< completed");
        closed.accept(Status.OK);
      }
    };
  }
}
