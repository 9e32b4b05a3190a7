package dev.kvrouter.extproc.server;

import dev.kvrouter.extproc.decision.OutputStart;
import dev.kvrouter.extproc.routing.Candidate;
import dev.kvrouter.extproc.routing.Decision;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.stub.StreamObserver;

/**
 * The response side of one routed request, seen through an ext_proc filter in {@code observability_mode}: Envoy
 * sends the response headers and body chunks, with the routing filter's {@code envoy.lb} metadata (carrying the
 * decision id) forwarded with every message and read from the first, and never waits for an answer, so watching a
 * response adds no latency to it. The stream opens only when the response starts: nothing of it is on the request path.
 *
 * <p>Feeds the {@link RequestListener} exactly as the routing stream would if the responses went through it.
 * Messages of one stream arrive one at a time; nothing is ever sent back.
 *
 * <p>A streamed response outside the truth check's sample ({@code truthCheckEvery}, plus every response from a
 * worker whose event view was stale: {@link #followed}) is left after its first chunk: the stream is closed from
 * our side, Envoy stops sending the rest (one message per token otherwise), and the end of the request comes from
 * the routing stream (see {@link Exchange}).
 */
final class ObserverStream implements StreamObserver<ProcessingRequest> {

  private final StreamObserver<ProcessingResponse> out;
  private final InFlight inFlight;
  private final RequestListener listener;
  private final int truthCheckEvery;
  private final ExtProcMessages messages;
  private final OutputStart output = new OutputStart();
  private Exchange exchange;
  private Decision decision;
  private boolean claimed;
  private boolean left;
  private boolean responseStarted;
  private boolean ended;
  private boolean closed;

  /**
   * @param truthCheckEvery follow one streamed response in this many to its end (by decision sequence number);
   *     1: every one, 0: none
   */
  ObserverStream(StreamObserver<ProcessingResponse> out, InFlight inFlight, RequestListener listener,
      int truthCheckEvery) {
    this(out, inFlight, listener, truthCheckEvery, new ExtProcMessages());
  }

  /** @param messages counts the forwarded metadata this stream parses */
  ObserverStream(StreamObserver<ProcessingResponse> out, InFlight inFlight, RequestListener listener,
      int truthCheckEvery, ExtProcMessages messages) {
    this.messages = messages;
    this.out = out;
    this.inFlight = inFlight;
    this.listener = listener;
    this.truthCheckEvery = truthCheckEvery;
  }

  @Override
  public void onNext(ProcessingRequest req) {
    inFlight.observerMessage();
    if (left) {
      return; // chunks Envoy sent before it saw our close
    }
    if (!claimed) {
      // The decision id from the routing filter's envoy.lb metadata, parsed here only: Envoy repeats it on every
      // later message, which never reads it. Configs that send the observer request headers are served below.
      String id = EnvoyMessages.forwardedDecision(req);
      messages.metadataParsed(ExtProcMessages.Stream.OBSERVER, DeferredMetadata.deferredSize(req));
      if (id != null) {
        claim(id);
      } else if (req.getRequestCase() != ProcessingRequest.RequestCase.REQUEST_HEADERS) {
        // A response that arrives without a decision was not routed by us (a pass-through path such as
        // /v1/models, or a request the router never saw): nothing to follow, so close now rather than leave the
        // stream to Envoy's deferred close.
        claimed = true;
      }
    }
    switch (req.getRequestCase()) {
      case REQUEST_HEADERS -> {
        if (!claimed) {
          claim(EnvoyMessages.header(req.getRequestHeaders(), Headers.DECISION));
        }
      }
      case RESPONSE_HEADERS -> onResponseHeaders(req.getResponseHeaders());
      case RESPONSE_BODY -> onResponseBody(req.getResponseBody());
      default -> { }
    }
    if (claimed && (decision == null || ended || left)) {
      close();
    }
  }

  private void claim(String id) {
    claimed = true;
    exchange = inFlight.claimByObserver(id);
    decision = exchange == null ? null : exchange.decision();
    if (exchange == null) {
      inFlight.unclaimedByObserver(id);
    }
  }

  /**
   * Closes the stream from our side as soon as there is nothing more to follow. In observability mode Envoy
   * otherwise keeps a finished stream open for its deferred-close timeout (5 s), and at a few hundred requests a
   * second those idle streams fill the router cluster's request limit and new streams overflow.
   */
  private void close() {
    if (!closed) {
      closed = true;
      out.onCompleted();
    }
  }

  private void onResponseHeaders(HttpHeaders h) {
    if (decision == null) {
      return; // not routed by us (pass-through path, router bypassed) or already expired
    }
    String status = EnvoyMessages.header(h, ":status");
    int code = 0;
    try {
      code = status == null ? 0 : Integer.parseInt(status);
    } catch (NumberFormatException ignored) {
      // keep 0: unknown
    }
    listener.onResponseHeaders(decision, code);
    if (h.getEndOfStream()) {
      end(false);
    }
  }

  private void onResponseBody(HttpBody b) {
    if (decision == null) {
      return;
    }
    // the first chunk of output: a streamed Responses answer opens with events sent before the prefill (OutputStart)
    boolean first = !responseStarted && output.feed(b.getBody().asReadOnlyByteBuffer());
    responseStarted |= first;
    listener.onResponseBody(decision, b.getBody(), first, b.getEndOfStream());
    if (b.getEndOfStream()) {
      end(false);
    } else if (first && !followed(decision, truthCheckEvery)) {
      // Leave if the routing stream is still open to report the end; onNext then closes this stream and Envoy
      // stops sending the rest.
      left = exchange.tryLeave();
      if (left) {
        inFlight.observerLeft();
      } else {
        inFlight.observerStayed();
      }
    }
  }

  /**
   * Whether {@code d}'s response is followed to its end for the truth check: every non-streamed one, one streamed
   * response in {@code truthCheckEvery} (by decision number), and (unless checks are off) every one from a worker
   * whose view was stale, because its usage report is what tests that view ({@code StaleViewTrust}).
   */
  static boolean followed(Decision d, int truthCheckEvery) {
    if (!d.detail().stream() || truthCheckEvery == 1) {
      return true;
    }
    if (truthCheckEvery == 0) {
      return false;
    }
    Candidate chosen = d.detail().chosen();
    return d.seq() % truthCheckEvery == 0 || (chosen != null && chosen.overlap().stale());
  }

  private void end(boolean aborted) {
    if (!ended && !left && decision != null) {
      ended = true;
      listener.onEnd(decision, aborted);
    }
  }

  @Override
  public void onError(Throwable t) {
    end(true); // the client or the upstream went away
  }

  @Override
  public void onCompleted() {
    end(!responseStarted);
    close();
  }
}
