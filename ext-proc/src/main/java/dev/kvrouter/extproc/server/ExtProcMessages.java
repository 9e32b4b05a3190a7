package dev.kvrouter.extproc.server;

import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.ForwardingServerCall;
import io.grpc.ForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import java.util.Locale;
import java.util.concurrent.atomic.LongAdder;

/**
 * The ext_proc messages the router received and sent, by stream (routing or response observer) and kind, and the
 * bytes of forwarded metadata ({@code metadata_context}) it parsed. The gRPC transport around each message is
 * about a third of the router's CPU through Envoy (BENCHMARKS.md, "Where the router's CPU goes"), so messages per
 * request is the figure a config change moves; counted at the gRPC boundary, where every message passes.
 */
public final class ExtProcMessages implements ServerInterceptor {

  /** The two ext_proc streams of a request, told apart by the observer filter's {@code x-kvrouter-role}. */
  public enum Stream {
    ROUTING, OBSERVER;

    public String label() {
      return name().toLowerCase(Locale.ROOT);
    }
  }

  private final LongAdder[][] received = new LongAdder[2][ProcessingRequest.RequestCase.values().length];
  private final LongAdder[][] sent = new LongAdder[2][ProcessingResponse.ResponseCase.values().length];
  private final LongAdder[] metadataBytes = {new LongAdder(), new LongAdder()};

  ExtProcMessages() {
    for (int s = 0; s < 2; s++) {
      for (int k = 0; k < received[s].length; k++) {
        received[s][k] = new LongAdder();
      }
      for (int k = 0; k < sent[s].length; k++) {
        sent[s][k] = new LongAdder();
      }
    }
  }

  /** The message kind's label: the ext_proc oneof case in lower case ({@code response_body}). */
  public static String label(Enum<?> kind) {
    return kind.name().toLowerCase(Locale.ROOT);
  }

  public long received(Stream stream, ProcessingRequest.RequestCase kind) {
    return received[stream.ordinal()][kind.ordinal()].sum();
  }

  public long sent(Stream stream, ProcessingResponse.ResponseCase kind) {
    return sent[stream.ordinal()][kind.ordinal()].sum();
  }

  /** Bytes of {@code metadata_context} parsed on {@code stream} since start. */
  public long metadataBytes(Stream stream) {
    return metadataBytes[stream.ordinal()].sum();
  }

  void metadataParsed(Stream stream, int bytes) {
    metadataBytes[stream.ordinal()].add(bytes);
  }

  @Override
  public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
      ServerCallHandler<Q, R> next) {
    int s = "observe".equals(headers.get(ExtProcServer.ROLE_HEADER)) ? 1 : 0;
    ServerCall<Q, R> counted = new ForwardingServerCall.SimpleForwardingServerCall<>(call) {
      @Override
      public void sendMessage(R message) {
        if (message instanceof ProcessingResponse r) {
          sent[s][r.getResponseCase().ordinal()].increment();
        }
        super.sendMessage(message);
      }
    };
    return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(next.startCall(counted, headers)) {
      @Override
      public void onMessage(Q message) {
        if (message instanceof ProcessingRequest r) {
          received[s][r.getRequestCase().ordinal()].increment();
          if (r.hasMetadataContext()) {
            metadataBytes[s].add(r.getMetadataContext().getSerializedSize());
          }
        }
        super.onMessage(message);
      }
    };
  }
}
