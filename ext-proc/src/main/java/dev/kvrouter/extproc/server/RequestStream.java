package dev.kvrouter.extproc.server;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.pipeline.PromptPipeline;
import dev.kvrouter.extproc.request.ErrorShape;
import dev.kvrouter.extproc.request.OpenAiError;
import dev.kvrouter.extproc.request.PreparedRequest;
import dev.kvrouter.extproc.request.RequestBodyParser;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.routing.Decision;
import dev.kvrouter.extproc.routing.RequestTimings;
import dev.kvrouter.extproc.routing.RouteRequest;
import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.xds.registry.Worker;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpTrailers;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.util.Map;
import java.util.UUID;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One HTTP request's ext_proc stream: reads the request, routes it once its body is complete, and follows the
 * response for load accounting.
 *
 * <p>Two request body modes are supported, learned from Envoy's {@code protocol_config} (or the configured
 * default for Envoys that do not send it):
 *
 * <ul>
 *   <li>BUFFERED: answer the headers at once, receive the whole body in one message, and put the destination
 *       headers on the body response (Envoy applies header mutations from a buffered body response) with
 *       {@code clear_route_cache} so cluster-header routing re-selects the route.
 *   <li>FULL_DUPLEX_STREAMED (the Gateway API Inference Extension protocol): hold the headers response until the
 *       body has ended, then send headers (with the destination) followed by the body re-streamed in chunks of at
 *       most 62,000 bytes. Envoy requires this header, body, trailer order.
 * </ul>
 *
 * <p>Threading: gRPC delivers one stream's messages one at a time on a Netty event-loop thread, where cheap
 * messages are answered inline (a thread hop per message would cost more than the work). Routing a large body
 * (parsing, templating, tokenizing) runs on the routing executor instead, because every stream from one Envoy
 * shares a few HTTP/2 connections, each pinned to one event loop: a long prompt tokenized inline would stall
 * all of them. All state is guarded by {@code this}; the routing task computes without the lock and takes it
 * only to publish the decision and send, so the event loop never waits for a tokenizer.
 */
final class RequestStream implements StreamObserver<ProcessingRequest> {

  private static final Logger log = LoggerFactory.getLogger(RequestStream.class);

  /**
   * Longest decision id taken from a client's {@code x-request-id}. The id keys {@link InFlight} (200,000 decisions)
   * and rides every record, log line and header of its request, and Envoy lets a header be 60 KiB (more if
   * configured): a bound on entries alone bounded nothing. Ids Envoy and client libraries make (a UUID is 36
   * characters) keep their whole length; two cut to the same prefix in flight at once are told apart as any reused
   * id is ({@link InFlight#register}).
   */
  static final int MAX_REQUEST_ID_CHARS = 128;

  private final StreamObserver<ProcessingResponse> out;
  private final Router router;
  private final RequestListener listener;
  private final ExtProcOptions options;
  private final RequestPreparer preparer;
  private final PromptPipeline pipeline;
  private final java.util.concurrent.Executor routingExecutor;
  private final InFlight inFlight;
  private final BodyBudget budget;

  private BodySendMode requestBodyMode;
  private BodySendMode responseBodyMode;
  private InferenceRequest.Kind kind;
  /** How the router's own answers are written for this request's API (OpenAI's until the path is known). */
  private ErrorShape errorShape = ErrorShape.OPENAI;
  private boolean passThrough;
  /**
   * A passed-through POST whose body may name a model: steered to that model's pool ({@link #toPool}). In
   * FULL_DUPLEX_STREAMED mode its headers are held, and its body with them, until the body has ended.
   */
  private boolean poolByModel;
  private String requestId;
  private String tenant;
  private String policyOverride;
  private String weightsOverride;
  private byte[] body = new byte[0];
  private int bodyLength;
  /** Bytes of {@link #budget} this stream's body buffer holds. */
  private long reserved;
  private boolean finished;
  private boolean headersSeen;
  /** The body is complete and handed to routing: the request phase has nothing more to read. */
  private boolean bodyEnded;
  private Decision decision;
  private boolean responseStarted;
  private boolean ended;
  /** A routing task is queued or computing off the event loop; messages wait for it. */
  private boolean routing;
  /** The routing task has started: from here it reads the body without the lock. */
  private boolean computing;
  private boolean aborted;
  private HttpTrailers pendingTrailers;
  /**
   * The decision waits in {@link InFlight} for the response observer, which then owns the request's end. If the
   * response phases come to this stream instead (an Envoy config without the observer filter), it takes the
   * decision back.
   */
  private boolean handedOff;
  /** Shared with the response observer; says which of the two reports the end when the observer leaves early. */
  private Exchange exchange;

  RequestStream(StreamObserver<ProcessingResponse> out, RequestPath path, ExtProcOptions options,
      java.util.concurrent.Executor routingExecutor, InFlight inFlight) {
    this(out, path, options, routingExecutor, inFlight, BodyBudget.UNLIMITED);
  }

  RequestStream(StreamObserver<ProcessingResponse> out, RequestPath path, ExtProcOptions options,
      java.util.concurrent.Executor routingExecutor, InFlight inFlight, BodyBudget budget) {
    this.budget = budget;
    this.preparer = path.preparer();
    this.pipeline = path.pipeline();
    this.router = path.router();
    this.listener = path.listener();
    this.out = out;
    this.inFlight = inFlight;
    this.options = options;
    this.routingExecutor = routingExecutor;
  }

  @Override
  public synchronized void onNext(ProcessingRequest req) {
    if (finished) {
      return; // an immediate response ended the exchange; Envoy will close the stream
    }
    if (req.hasProtocolConfig()) {
      requestBodyMode = req.getProtocolConfig().getRequestBodyMode();
      responseBodyMode = req.getProtocolConfig().getResponseBodyMode();
    }
    try {
      switch (req.getRequestCase()) {
        case REQUEST_HEADERS -> {
          if (headersSeen) {
            unexpected("request_headers");
          } else if (passThrough) {
            // The body went on unrouted before them: nothing is left to route or refuse, and Envoy waits for this
            // answer (in FULL_DUPLEX_STREAMED mode without a timeout)
            headersSeen = true;
            listener.onUnexpectedMessage("request_headers");
            send(EnvoyMessages.continueRequestHeaders());
          } else {
            onRequestHeaders(req.getRequestHeaders());
          }
        }
        case REQUEST_BODY -> {
          if (bodyEnded) {
            unexpected("request_body");
          } else {
            if (!headersSeen && !passThrough) {
              // An Envoy with request_header_mode SKIP sends the body alone: without a path nothing can be routed,
              // so it goes on unrouted at once (it used to reach the preparer without a kind and get a 500)
              unexpected("request_body_before_headers");
              passThrough = true;
            }
            onRequestBody(req.getRequestBody());
          }
        }
        case REQUEST_TRAILERS -> {
          if (!headersSeen && !passThrough) {
            // as a body without headers: no path to route by, and no body to refuse
            unexpected("request_trailers_before_headers");
            passThrough = true;
          }
          onRequestTrailers(req.getRequestTrailers());
        }
        case RESPONSE_HEADERS -> onResponseHeaders(req.getResponseHeaders());
        case RESPONSE_BODY -> onResponseBody(req.getResponseBody());
        case RESPONSE_TRAILERS -> send(EnvoyMessages.continueResponseTrailers());
        default -> log.warn("ignoring ext_proc message of unknown kind {}", req.getRequestCase());
      }
    } catch (RuntimeException e) {
      // One bad request must never take the service down; answer it and keep serving the rest.
      log.error("request {} failed inside the router", requestId, e);
      if (decision == null) {
        finish(OpenAiError.internal("the router failed to process this request"), "internal_error");
      }
    }
  }

  /**
   * Envoy sends each request phase once, and headers first, so this is another client, an Envoy configured to skip
   * the headers, or an Envoy bug. Ignored: acting on it would route the request twice (a second decision nobody ends)
   * or re-read a body a routing thread is reading.
   */
  private void unexpected(String message) {
    listener.onUnexpectedMessage(message);
    log.warn("request {}: ignoring ext_proc {} {}", requestId, message,
        message.endsWith("_before_headers") ? "(no request headers came first)" : "after the stream already had it");
  }

  private void onRequestHeaders(HttpHeaders h) {
    headersSeen = true;
    if (requestBodyMode == null) {
      requestBodyMode = options.defaultRequestBodyMode();
      responseBodyMode = options.defaultResponseBodyMode();
    }
    String method = EnvoyMessages.header(h, ":method");
    String path = EnvoyMessages.header(h, ":path");
    String normalized = normalizedPath(path);
    // before any refusal below: a Messages client gets each of them in the shape its SDK parses
    errorShape = ErrorShape.forPath(normalized);
    requestId = EnvoyMessages.header(h, Headers.REQUEST_ID);
    if (requestId == null || requestId.isEmpty()) {
      requestId = UUID.randomUUID().toString();
    } else if (requestId.length() > MAX_REQUEST_ID_CHARS) {
      // never between the halves of a surrogate pair: a lone half has no UTF-8 form, so Envoy would be handed "?"
      // in its place and the response observer would claim a decision id nobody registered
      int end = Character.isHighSurrogate(requestId.charAt(MAX_REQUEST_ID_CHARS - 1)) ? MAX_REQUEST_ID_CHARS - 1
          : MAX_REQUEST_ID_CHARS;
      requestId = requestId.substring(0, end);
    }
    try {
      tenant = options.tenantHeader() == null ? null : EnvoyMessages.exactHeader(h, options.tenantHeader());
    } catch (java.nio.charset.CharacterCodingException e) {
      // Tenants are told apart by their UTF-8 text; bytes that are not UTF-8 would merge distinct tenants.
      finish(OpenAiError.badRequest("the request's tenant identity is not UTF-8 text"), "tenant_not_utf8");
      return;
    }
    policyOverride = EnvoyMessages.header(h, Headers.POLICY);
    weightsOverride = EnvoyMessages.header(h, Headers.WEIGHTS);
    kind = kindOf(method, normalized);
    boolean fullDuplex = requestBodyMode == BodySendMode.FULL_DUPLEX_STREAMED;
    String storedId = storedResponseId(method, normalized);
    if (storedId != null) {
      // get, delete, cancel or list a stored response: only the worker that stores it knows it. Not inference (no
      // KV cache, no salt), so tenants too; an id that names no worker of the fleet goes to the pool as before.
      passThrough = true;
      Worker holder = router.storedResponseHolder(storedId);
      send(holder == null ? EnvoyMessages.continueRequestHeaders()
          : EnvoyMessages.routeOnHeaders(EnvoyMessages.destination(holder).build(),
              EnvoyMessages.lbMetadata(holder.endpoint(), null)));
      return;
    }
    boolean tenanted = tenant != null && !tenant.isEmpty();
    if (kind == InferenceRequest.Kind.MESSAGES && tenanted && !options.saltMessagesApi()) {
      // vLLM's Anthropic request model ignores fields it does not declare, and only recent versions declare
      // cache_salt: a salted body could reach an engine that drops the salt and shares the tenant's cache. Such a
      // request is refused as any unrouted path is, unless the operator says every worker honours the salt.
      finish(OpenAiError.unknownUrl(method, path), "tenant_path_not_routed");
      return;
    }
    if (kind == null && tenanted && "POST".equals(method)
        && (normalized == null || !options.tenantPassThroughPaths().contains(normalized))) {
      // A tenant's body may reach the engine only through the salt rewrite: an engine endpoint the router does not
      // understand (/v1/embeddings, a path spelled so that only the engine reads it as chat) would let the tenant
      // choose its cache_salt, or send none, and so read or probe another partition.
      finish(OpenAiError.unknownUrl(method, path), "tenant_path_not_routed");
      return;
    }
    if (kind == null) {
      passThrough = true; // /v1/models, /health, ...: the default route sends them to the pool
      // a POST's model, when its body names one, picks that model's pool instead (toPool): on the body's answer in
      // BUFFERED mode; in FULL_DUPLEX_STREAMED mode only the headers' answer can set the route's header, so it waits
      // for the body as a routed request's does
      poolByModel = "POST".equals(method) && !h.getEndOfStream()
          && (requestBodyMode == BodySendMode.BUFFERED || fullDuplex);
      if (!(poolByModel && fullDuplex)) {
        send(EnvoyMessages.continueRequestHeaders());
      }
      return;
    }
    if (h.getEndOfStream()) {
      finish(OpenAiError.badRequest("a JSON request body is required"), "empty_body");
      return;
    }
    if (!fullDuplex && requestBodyMode != BodySendMode.BUFFERED) {
      // In STREAMED modes the request headers have already left before the body arrives, so no destination
      // could be set: say so loudly and let Envoy's default route balance it.
      log.error("request body mode {} cannot route; configure BUFFERED or FULL_DUPLEX_STREAMED", requestBodyMode);
      if (tenanted) {
        // Nor could the salt be rewritten: the tenant's body would reach the engine with no salt or its own.
        finish(OpenAiError.internal("the router cannot isolate tenants in request body mode " + requestBodyMode),
            "tenant_body_mode");
        return;
      }
      passThrough = true;
      send(EnvoyMessages.continueRequestHeaders());
      return;
    }
    if (!fullDuplex) {
      send(EnvoyMessages.continueRequestHeaders());
    }
    // FULL_DUPLEX_STREAMED: the headers response is held until the body is complete.
  }

  private void onRequestBody(HttpBody b) {
    boolean fullDuplex = requestBodyMode == BodySendMode.FULL_DUPLEX_STREAMED;
    if (passThrough) {
      if (poolByModel && fullDuplex) {
        holdForPool(b);
        return;
      }
      if (poolByModel) {
        poolByModel = false; // BUFFERED: the whole body is this one message
        toPool(b.getBody());
        return;
      }
      send(fullDuplex
          ? EnvoyMessages.streamedRequestBody(b.getBody(), b.getEndOfStream())
          : EnvoyMessages.continueRequestBody());
      return;
    }
    if (!append(b.getBody())) {
      return;
    }
    // BUFFERED sends the whole body in one message, and without end_of_stream when trailers follow it (Envoy's
    // ext_proc filter sends the buffered body when the trailers arrive and holds the trailers until the body is
    // answered, or never sends them under request_trailer_mode SKIP): waiting for either would stall the
    // request until message_timeout and send it unrouted.
    if (b.getEndOfStream() || !fullDuplex) {
      routeAndForward(b.getEndOfStream());
    }
  }

  private void onRequestTrailers(HttpTrailers t) {
    if (poolByModel && requestBodyMode == BodySendMode.FULL_DUPLEX_STREAMED && !bodyEnded) {
      pendingTrailers = t; // the body ended without end_of_stream because trailers follow
      heldToPool(false);
      return;
    }
    if (routing) {
      pendingTrailers = t; // answered once the decision (and the body before it) has been sent
      return;
    }
    if (!passThrough && decision == null) {
      pendingTrailers = t;
      routeAndForward(false); // the body ended without end_of_stream because trailers follow
      return;
    }
    send(EnvoyMessages.continueRequestTrailers());
  }

  /**
   * Sends a request the router does not route on to the pool of the model its body names ({@link Router#poolFor}),
   * or on to the default route (every model's workers) when it names none the fleet serves. Reading a large body for
   * its model goes to a routing thread, as routing does; trailers that arrive meanwhile wait for the answer.
   */
  private void toPool(ByteString requestBody) {
    if (requestBody.size() <= options.inlineRoutingMaxBytes()) {
      send(poolResponse(requestBody));
      return;
    }
    routing = true;
    routingExecutor.execute(() -> {
      ProcessingResponse r = poolResponse(requestBody);
      synchronized (this) {
        routing = false;
        if (aborted || finished) {
          return;
        }
        try {
          send(r);
          if (pendingTrailers != null) {
            pendingTrailers = null;
            send(EnvoyMessages.continueRequestTrailers());
          }
        } catch (RuntimeException e) {
          log.debug("request {} ended while its model was read: {}", requestId, e.toString());
        }
      }
    });
  }

  /**
   * FULL_DUPLEX_STREAMED: holds a passed-through POST's body until it ends, then answers the held headers with its
   * model's pool ({@link #heldToPool}). A body the router may not hold (over {@code limits.max_body_bytes}, or the
   * budget of all bodies spent) is never refused for it: it goes on at once to the default route, as before.
   */
  private void holdForPool(HttpBody b) {
    if (hold(b.getBody()) != null) {
      poolByModel = false;
      send(EnvoyMessages.continueRequestHeaders());
      if (bodyLength > 0) {
        send(EnvoyMessages.streamedRequestBody(ByteString.copyFrom(body, 0, bodyLength), false));
      }
      releaseBody();
      send(EnvoyMessages.streamedRequestBody(b.getBody(), b.getEndOfStream()));
      return;
    }
    if (b.getEndOfStream()) {
      heldToPool(true);
    }
  }

  /**
   * Answers the held headers with the pool of the model the held body names (or the default route), then sends the
   * body and any trailers that waited; a large body is read on a routing thread, as in {@link #toPool}.
   */
  private void heldToPool(boolean endOfStream) {
    bodyEnded = true;
    poolByModel = false;
    if (bodyLength <= options.inlineRoutingMaxBytes()) {
      releaseHeld(poolHeaders(UnsafeByteOperations.unsafeWrap(body, 0, bodyLength)), endOfStream);
      return;
    }
    routing = true;
    computing = true; // the routing thread reads the body without the lock; abort leaves its release to it
    routingExecutor.execute(() -> {
      // the array is this stream's alone and nothing writes it once the body has ended
      ProcessingResponse headers = poolHeaders(UnsafeByteOperations.unsafeWrap(body, 0, bodyLength));
      synchronized (this) {
        routing = false;
        computing = false;
        if (aborted || finished) {
          releaseBody();
          return;
        }
        try {
          releaseHeld(headers, endOfStream);
        } catch (RuntimeException e) {
          log.debug("request {} ended while its model was read: {}", requestId, e.toString());
        }
      }
    });
  }

  private void releaseHeld(ProcessingResponse headers, boolean endOfStream) {
    send(headers);
    for (int off = 0; off < bodyLength; off += EnvoyMessages.STREAMED_CHUNK) {
      int end = Math.min(bodyLength, off + EnvoyMessages.STREAMED_CHUNK);
      send(EnvoyMessages.streamedRequestBody(ByteString.copyFrom(body, off, end - off),
          endOfStream && end == bodyLength));
    }
    if (bodyLength == 0) {
      send(EnvoyMessages.streamedRequestBody(ByteString.EMPTY, endOfStream));
    }
    releaseBody();
    if (pendingTrailers != null) {
      pendingTrailers = null;
      send(EnvoyMessages.continueRequestTrailers());
    }
  }

  /** The request-headers answer naming the pool of {@code requestBody}'s model, or letting the default route be. */
  private ProcessingResponse poolHeaders(ByteString requestBody) {
    HeaderMutation pool = poolRoute(requestBody);
    return pool == null ? EnvoyMessages.continueRequestHeaders()
        : EnvoyMessages.routeOnHeaders(pool, com.google.protobuf.Struct.getDefaultInstance());
  }

  private ProcessingResponse poolResponse(ByteString requestBody) {
    HeaderMutation pool = requestBody.size() > options.maxBodyBytes() ? null : poolRoute(requestBody);
    return pool == null ? EnvoyMessages.continueRequestBody()
        : EnvoyMessages.routeOnBufferedBody(pool, com.google.protobuf.Struct.getDefaultInstance());
  }

  /** The route header naming the pool of {@code requestBody}'s model, or null when it names none the router knows. */
  private HeaderMutation poolRoute(ByteString requestBody) {
    String pool = router.poolFor(RequestBodyParser.modelOf(requestBody.newInput()));
    return pool == null ? null
        : HeaderMutation.newBuilder().addSetHeaders(EnvoyMessages.header(Headers.CLUSTER, pool)).build();
  }

  private boolean append(ByteString chunk) {
    String refused = hold(chunk);
    if (refused != null) {
      finish(refused.equals("body_too_large") ? OpenAiError.tooLarge(options.maxBodyBytes())
          : OpenAiError.bodiesOverBudget(), refused);
      return false;
    }
    return true;
  }

  /** Adds {@code chunk} to the held body; null, or why it cannot be held ({@code body_too_large}, {@code body_budget}). */
  private String hold(ByteString chunk) {
    long total = (long) bodyLength + chunk.size();
    if (total > options.maxBodyBytes()) {
      return "body_too_large";
    }
    if (total > body.length) {
      int capacity = (int) Math.min(options.maxBodyBytes(), Math.max(total, 2L * body.length));
      if (!budget.tryReserve(capacity - body.length)) {
        return "body_budget";
      }
      reserved += capacity - body.length;
      byte[] grown = new byte[capacity];
      System.arraycopy(body, 0, grown, 0, bodyLength);
      body = grown;
    }
    chunk.copyTo(body, bodyLength);
    bodyLength = (int) total;
    return null;
  }

  /** Routes inline when the body is small, else on the routing executor; then forwards the request. */
  private void routeAndForward(boolean endOfStream) {
    bodyEnded = true;
    if (bodyLength <= options.inlineRoutingMaxBytes()) {
      publish(decide(), endOfStream);
      return;
    }
    routing = true;
    routingExecutor.execute(() -> routeQueued(endOfStream));
  }

  /**
   * A routing thread's task. A request whose stream Envoy closed while it waited for the thread (its message_timeout
   * fired, or the client left) was sent on unrouted and Envoy ignores a late answer: routing it anyway, under
   * overload, kept the threads on stale requests while every new one waited past its own timeout.
   */
  private void routeQueued(boolean endOfStream) {
    synchronized (this) {
      if (aborted) {
        routing = false;
        listener.onAbandoned();
        return;
      }
      computing = true;
    }
    Object outcome;
    try {
      outcome = decide();
    } catch (RuntimeException e) {
      log.error("request {} failed inside the router", requestId, e);
      outcome = OpenAiError.internal("the router failed to process this request");
    }
    synchronized (this) {
      routing = false;
      computing = false;
      if (aborted) {
        releaseBody();
        if (outcome instanceof Routed r) {
          decision = r.decision();
          listener.onDecision(decision);
          end(true);
        }
        return;
      }
      try {
        publish(outcome, endOfStream);
      } catch (RuntimeException e) {
        // Off the event loop nobody else catches it: a stream Envoy cancelled meanwhile refuses our messages
        // (its onError then ends the request); anything else is ours, and must not kill the pool's thread.
        if (e instanceof StatusRuntimeException s && s.getStatus().getCode() == Status.Code.CANCELLED) {
          log.debug("request {} was cancelled while it was routed", requestId);
        } else {
          log.error("request {} failed inside the router", requestId, e);
        }
      }
    }
  }

  /** Envoy closed the stream: a request still queued for a routing thread will not be routed, drop its body now. */
  private void abort() {
    aborted = true;
    if (!computing) {
      releaseBody();
    }
  }

  /**
   * Drops the body and gives its bytes back to the budget. Never while a routing thread reads it without the lock
   * ({@link #computing}): that thread releases it when it is done.
   */
  private void releaseBody() {
    body = null;
    if (reserved > 0) {
      budget.release(reserved);
      reserved = 0;
    }
  }

  /** A routing outcome with the prepared request it came from (the body rewrite needs both). */
  private record Routed(Decision decision, PreparedRequest prepared) {}

  /**
   * Parses, resolves the model and the tenant's namespace, and routes; returns a {@link Routed} or the
   * {@link OpenAiError} for a bad request. Lock-free.
   */
  private Object decide() {
    PreparedRequest prepared;
    try {
      prepared = preparer.prepare(kind, body, bodyLength, tenant);
    } catch (RequestBodyParser.BadRequest e) {
      return e.error();
    }
    PromptPipeline.Outcome prompt = pipeline != null ? pipeline.run(prepared) : withoutPipeline(prepared);
    // Without block hashes the body size stands in for the prompt length (load accounting only).
    Decision d = router.route(new RouteRequest(requestId, prepared.request(), prepared.scope().tenantHash(),
        policyOverride, weightsOverride, prompt.prompt(), prompt.unavailable(), bodyLength / 4, prompt.timings()));
    if (d.routed()) {
      prompt.complete(new WorkerId(d.chosen().name(), d.dpRank()));
    }
    return new Routed(d, prepared);
  }

  /** Why the prompt is not reproduced when no pipeline is configured. */
  private static PromptPipeline.Outcome withoutPipeline(PreparedRequest prepared) {
    String why = prepared.scope().fallback() != null ? prepared.scope().fallback()
        : prepared.request().unreproducible() != null ? prepared.request().unreproducible() : "no_pipeline";
    return new PromptPipeline.Outcome(null, why, new RequestTimings(prepared.parseNanos(), 0, 0, 0), null);
  }

  private void publish(Object outcome, boolean endOfStream) {
    if (outcome instanceof OpenAiError error) {
      finish(error, "bad_request");
      return;
    }
    Routed routed = (Routed) outcome;
    tenant = null; // the namespace and the tenant's pseudonym carry it from here on
    decision = routed.decision();
    if (decision.routed()) {
      // Registered before anything is recorded or sent, so its id is unique among requests in flight: the
      // record, the headers and the observer's claim all use the id registration settled on.
      exchange = inFlight.register(new Exchange(decision));
      decision = exchange.decision();
      // from here its end belongs to the observer, or to onError/onCompleted taking it back (also if a send below
      // fails on a stream Envoy cancelled meanwhile, so the entry does not wait for its expiry)
      handedOff = true;
    }
    listener.onDecision(decision);
    if (!decision.routed()) {
      finish(decision.rejection(), decision.reason());
      return;
    }
    HeaderMutation.Builder headers = EnvoyMessages.destination(decision.chosen())
        .addSetHeaders(EnvoyMessages.header(Headers.DECISION, decision.id()));
    if (decision.chosen().dpSize() > 1) {
      headers.addSetHeaders(EnvoyMessages.header(Headers.DP_RANK, Integer.toString(decision.dpRank())));
    }
    // Tenant isolation: the engine must see the effective cache_salt (docs/request-path.md, "The body rewrite").
    PreparedRequest prepared = routed.prepared();
    // A Responses request gets a request_id naming its worker, so its continuations find it (ResponseIds)
    String responseId = prepared.responseIdFor(decision.chosen().name());
    boolean rewritten = prepared.rewritesBody() || responseId != null;
    byte[] upstream = rewritten ? prepared.upstreamBody(body, bodyLength, responseId) : null;
    if (rewritten && requestBodyMode != BodySendMode.FULL_DUPLEX_STREAMED) {
      // BUFFERED keeps the client's content-length, and Envoy rejects a mutated body that does not match it.
      headers.addSetHeaders(EnvoyMessages.header("content-length", Integer.toString(upstream.length)));
    }
    HeaderMutation mutation = headers.build();
    var metadata = EnvoyMessages.lbMetadata(decision.chosen().endpoint(), decision.id());
    if (requestBodyMode == BodySendMode.FULL_DUPLEX_STREAMED) {
      send(EnvoyMessages.routeOnHeaders(mutation, metadata));
      // A rewritten body is a fresh array this stream owns and never modifies: wrap it instead of copying again.
      ByteString all = rewritten ? UnsafeByteOperations.unsafeWrap(upstream)
          : ByteString.copyFrom(body, 0, bodyLength);
      int n = all.size();
      if (n == 0) {
        send(EnvoyMessages.streamedRequestBody(ByteString.EMPTY, endOfStream));
      }
      for (int off = 0; off < n; off += EnvoyMessages.STREAMED_CHUNK) {
        int end = Math.min(n, off + EnvoyMessages.STREAMED_CHUNK);
        send(EnvoyMessages.streamedRequestBody(all.substring(off, end), endOfStream && end == n));
      }
    } else if (rewritten) {
      send(EnvoyMessages.routeOnBufferedBody(mutation, metadata, UnsafeByteOperations.unsafeWrap(upstream)));
    } else {
      send(EnvoyMessages.routeOnBufferedBody(mutation, metadata));
    }
    releaseBody(); // the bytes are Envoy's again; keep the stream's footprint small while the response streams
    if (pendingTrailers != null) {
      pendingTrailers = null;
      send(EnvoyMessages.continueRequestTrailers());
    }
    if (log.isDebugEnabled()) {
      log.debug("routed request {} model={} worker={} policy={} reason={}", decision.id(), decision.model(),
          decision.chosen().name(), decision.policy(), decision.reason());
    }
  }

  /**
   * Response phases came to this stream: it follows the response, taking the decision back, unless an observer
   * already has it (a routing filter that asks for the response phases next to the observer filter). Then the
   * decision stays handed off: the observer follows the response, and this stream's close reports the end only if
   * the observer left (see {@link Exchange}).
   */
  private boolean follows() {
    if (decision == null) {
      return false;
    }
    if (handedOff && (inFlight.reclaim(exchange) || !exchange.isObserved())) {
      handedOff = false; // taken back, or expired unclaimed: nobody else will end it
    }
    return !handedOff;
  }

  private void onResponseHeaders(HttpHeaders h) {
    HeaderMutation.Builder mutation = HeaderMutation.newBuilder();
    if (decision != null) {
      mutation.addSetHeaders(EnvoyMessages.header(Headers.DECISION, decision.id()));
    }
    if (follows()) {
      String status = EnvoyMessages.header(h, ":status");
      listener.onResponseHeaders(decision, status == null ? 0 : parseStatus(status));
      if (h.getEndOfStream()) {
        end(false);
      }
    }
    send(EnvoyMessages.continueResponseHeaders(mutation.build()));
  }

  private void onResponseBody(HttpBody b) {
    boolean follows = follows();
    if (follows) {
      boolean first = !responseStarted && !b.getBody().isEmpty();
      responseStarted |= first;
      listener.onResponseBody(decision, b.getBody(), first, b.getEndOfStream());
    }
    if (responseBodyMode == BodySendMode.FULL_DUPLEX_STREAMED) {
      send(EnvoyMessages.streamedResponseBody(b.getBody(), b.getEndOfStream()));
    } else {
      send(EnvoyMessages.continueResponseBody());
    }
    if (b.getEndOfStream() && follows) {
      end(false);
    }
  }

  private void finish(OpenAiError error, String reason) {
    finished = true;
    if (!computing) {
      releaseBody();
    }
    if (decision == null) {
      listener.onRefused(reason); // a decision's own rejection is counted with the decision
    }
    send(EnvoyMessages.immediate(error, errorShape, requestId, error.status() == 429
        ? Map.of("retry-after", Integer.toString(options.retryAfterSeconds()))
        : Map.of()));
    if (log.isDebugEnabled()) {
      log.debug("answered request {} with {} ({})", requestId, error.status(), reason);
    }
  }

  /** No observer claimed the decision after the exchange was over: the exchange ended when this stream closed. */
  private synchronized void endOrphan() {
    end(false);
  }

  private void end(boolean aborted) {
    if (!ended) {
      ended = true;
      listener.onEnd(decision, aborted);
    }
  }

  private void send(ProcessingResponse r) { // callers hold the lock
    out.onNext(r);
  }

  @Override
  public synchronized void onError(Throwable t) {
    // Envoy resets the stream when the client goes away or the upstream fails mid-response.
    abort();
    if (handedOff) {
      // Unclaimed means the request died before reaching the observer: end it here. Claimed: the observer ends it,
      // unless it left after the first chunk.
      handedOff = false;
      if (exchange.exchangeEnded()) {
        listener.onObserverLeft(decision);
        end(true);
      } else if (inFlight.reclaim(exchange)) {
        end(true);
      }
    } else if (decision != null) {
      end(true);
    }
    if (!(t instanceof StatusRuntimeException s && s.getStatus().getCode() == Status.Code.CANCELLED)) {
      log.debug("ext_proc stream for {} ended with {}", requestId, t.toString());
    }
  }

  @Override
  public synchronized void onCompleted() {
    if (routing) {
      abort(); // Envoy gave up on this request while it was being routed
    } else {
      releaseBody(); // a body still held here was never routed (its upload ended unfinished)
    }
    if (handedOff) {
      // Envoy closes this stream when the HTTP exchange is over. An observer that left after the first chunk
      // waits for exactly this; one that follows the response ends the request itself.
      handedOff = false;
      if (exchange.exchangeEnded()) {
        listener.onObserverLeft(decision);
        end(false);
      } else {
        // The observer follows the response to its end, or has not come: a late one still claims it, one that
        // went to another replica never will (InFlight.endOrphans ends it after a grace).
        inFlight.routingClosedUnclaimed(exchange, System.nanoTime(), this::endOrphan);
      }
    } else if (decision != null) {
      end(!responseStarted && !ended);
    }
    out.onCompleted();
  }

  /**
   * The response id of a Responses API lifecycle request ({@code GET} or {@code DELETE /v1/responses/{id}}, {@code POST
   * /v1/responses/{id}/cancel}, {@code GET /v1/responses/{id}/input_items}, OpenAI's routes), or null.
   */
  static String storedResponseId(String method, String path) {
    String prefix = "/v1/responses/";
    if (path == null || !path.startsWith(prefix) || path.length() == prefix.length()) {
      return null;
    }
    String rest = path.substring(prefix.length());
    int slash = rest.indexOf('/');
    String id = slash < 0 ? rest : rest.substring(0, slash);
    String tail = slash < 0 ? "" : rest.substring(slash);
    boolean lifecycle = switch (tail) {
      case "" -> "GET".equals(method) || "DELETE".equals(method);
      case "/cancel" -> "POST".equals(method);
      case "/input_items" -> "GET".equals(method);
      default -> false;
    };
    return lifecycle ? id : null;
  }

  /** The kind of inference a request is, from its method and raw {@code :path}; null for anything else. */
  static InferenceRequest.Kind inferenceKind(String method, String path) {
    return kindOf(method, normalizedPath(path));
  }

  private static InferenceRequest.Kind kindOf(String method, String path) {
    if (path == null || !"POST".equals(method)) {
      return null;
    }
    return switch (path) {
      case "/v1/completions" -> InferenceRequest.Kind.COMPLETIONS;
      case "/v1/chat/completions" -> InferenceRequest.Kind.CHAT;
      case "/v1/responses" -> InferenceRequest.Kind.RESPONSES;
      case "/v1/messages" -> InferenceRequest.Kind.MESSAGES;
      default -> null;
    };
  }

  /**
   * The path as the engine reads it: without query or fragment, percent-decoded once (uvicorn decodes before
   * Starlette matches routes, and Envoy forwards {@code :path} as sent unless it normalizes), repeated slashes
   * merged and a trailing slash dropped. Classifying the raw {@code :path} would let {@code /v1/chat/%63ompletions}
   * pass unrouted and unsalted while the engine serves it as chat. Null when absent or not validly escaped: such a
   * path is never classified as inference (a tenant's POST to it is refused).
   */
  static String normalizedPath(String path) {
    if (path == null) {
      return null;
    }
    int end = path.length();
    for (int i = 0; i < path.length(); i++) {
      char c = path.charAt(i);
      if (c == '?' || c == '#') {
        end = i;
        break;
      }
    }
    String p = path.substring(0, end);
    if (p.indexOf('%') >= 0) {
      p = percentDecode(p);
      if (p == null) {
        return null;
      }
    }
    StringBuilder b = new StringBuilder(p.length());
    for (int i = 0; i < p.length(); i++) {
      char c = p.charAt(i);
      if (c != '/' || b.length() == 0 || b.charAt(b.length() - 1) != '/') {
        b.append(c);
      }
    }
    if (b.length() > 1 && b.charAt(b.length() - 1) == '/') {
      b.setLength(b.length() - 1);
    }
    return b.toString();
  }

  /** Decodes {@code %XX} escapes as UTF-8 bytes; null for a malformed escape or invalid UTF-8. */
  private static String percentDecode(String s) {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream(s.length());
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '%') {
        int hi = i + 2 < s.length() ? Character.digit(s.charAt(i + 1), 16) : -1;
        int lo = hi < 0 ? -1 : Character.digit(s.charAt(i + 2), 16);
        if (lo < 0) {
          return null;
        }
        out.write(hi << 4 | lo);
        i += 2;
      } else if (c < 0x80) {
        out.write(c);
      } else {
        return null; // Envoy forwards header bytes; a non-ASCII :path is not a URL the router classifies
      }
    }
    try {
      return java.nio.charset.StandardCharsets.UTF_8.newDecoder()
          .decode(java.nio.ByteBuffer.wrap(out.toByteArray())).toString();
    } catch (java.nio.charset.CharacterCodingException e) {
      return null;
    }
  }

  private static int parseStatus(String s) {
    try {
      return Integer.parseInt(s);
    } catch (NumberFormatException e) {
      return 0;
    }
  }
}
