package dev.kvrouter.extproc.server;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import dev.kvrouter.extproc.request.ErrorShape;
import dev.kvrouter.extproc.request.OpenAiError;
import dev.kvrouter.xds.registry.Worker;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.config.core.v3.HeaderValueOption;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.HeadersResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ImmediateResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.StreamedBodyResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.TrailersResponse;
import io.envoyproxy.envoy.type.v3.HttpStatus;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/** Builders for the ext_proc responses the router sends, so the stream state machine reads as a protocol. */
final class EnvoyMessages {

  /** Envoy implementations cap streamed chunks at 64 KiB; GIE's endpoint picker uses 62,000 bytes. */
  static final int STREAMED_CHUNK = 62_000;
  static final String LB_NAMESPACE = "envoy.lb";

  // Immutable, and sent for most requests: built (and their serialized size computed) once.
  private static final ProcessingResponse CONTINUE_REQUEST_HEADERS =
      ProcessingResponse.newBuilder().setRequestHeaders(HeadersResponse.getDefaultInstance()).build();
  private static final ProcessingResponse CONTINUE_REQUEST_BODY =
      ProcessingResponse.newBuilder().setRequestBody(BodyResponse.getDefaultInstance()).build();
  private static final ProcessingResponse CONTINUE_RESPONSE_BODY =
      ProcessingResponse.newBuilder().setResponseBody(BodyResponse.getDefaultInstance()).build();
  private static final ProcessingResponse CONTINUE_REQUEST_TRAILERS =
      ProcessingResponse.newBuilder().setRequestTrailers(TrailersResponse.getDefaultInstance()).build();
  private static final ProcessingResponse CONTINUE_RESPONSE_TRAILERS =
      ProcessingResponse.newBuilder().setResponseTrailers(TrailersResponse.getDefaultInstance()).build();

  private EnvoyMessages() {}

  static ProcessingResponse continueRequestHeaders() {
    return CONTINUE_REQUEST_HEADERS;
  }

  static ProcessingResponse continueResponseHeaders(HeaderMutation mutation) {
    return ProcessingResponse.newBuilder()
        .setResponseHeaders(HeadersResponse.newBuilder().setResponse(CommonResponse.newBuilder()
            .setHeaderMutation(mutation)))
        .build();
  }

  static ProcessingResponse continueRequestBody() {
    return CONTINUE_REQUEST_BODY;
  }

  static ProcessingResponse continueResponseBody() {
    return CONTINUE_RESPONSE_BODY;
  }

  static ProcessingResponse continueRequestTrailers() {
    return CONTINUE_REQUEST_TRAILERS;
  }

  static ProcessingResponse continueResponseTrailers() {
    return CONTINUE_RESPONSE_TRAILERS;
  }

  /** Destination headers on the request-headers response (FULL_DUPLEX_STREAMED: sent after the body). */
  static ProcessingResponse routeOnHeaders(HeaderMutation mutation, Struct metadata) {
    return ProcessingResponse.newBuilder()
        .setRequestHeaders(HeadersResponse.newBuilder().setResponse(CommonResponse.newBuilder()
            .setHeaderMutation(mutation)
            .setClearRouteCache(true)))
        .setDynamicMetadata(metadata)
        .build();
  }

  /** Destination headers on the buffered request-body response; Envoy applies them in BUFFERED mode. */
  static ProcessingResponse routeOnBufferedBody(HeaderMutation mutation, Struct metadata) {
    return ProcessingResponse.newBuilder()
        .setRequestBody(BodyResponse.newBuilder().setResponse(CommonResponse.newBuilder()
            .setHeaderMutation(mutation)
            .setClearRouteCache(true)))
        .setDynamicMetadata(metadata)
        .build();
  }

  /**
   * Destination headers plus a replaced body on the buffered request-body response. Envoy keeps the client's
   * {@code content-length} in BUFFERED mode and rejects a body that does not match it, so {@code mutation} must
   * set the new length.
   */
  static ProcessingResponse routeOnBufferedBody(HeaderMutation mutation, Struct metadata, ByteString body) {
    return ProcessingResponse.newBuilder()
        .setRequestBody(BodyResponse.newBuilder().setResponse(CommonResponse.newBuilder()
            .setHeaderMutation(mutation)
            .setBodyMutation(BodyMutation.newBuilder().setBody(body))
            .setClearRouteCache(true)))
        .setDynamicMetadata(metadata)
        .build();
  }

  static ProcessingResponse streamedRequestBody(ByteString chunk, boolean endOfStream) {
    return ProcessingResponse.newBuilder()
        .setRequestBody(streamedBody(chunk, endOfStream))
        .build();
  }

  static ProcessingResponse streamedResponseBody(ByteString chunk, boolean endOfStream) {
    return ProcessingResponse.newBuilder()
        .setResponseBody(streamedBody(chunk, endOfStream))
        .build();
  }

  private static BodyResponse streamedBody(ByteString chunk, boolean endOfStream) {
    return BodyResponse.newBuilder().setResponse(CommonResponse.newBuilder()
            .setBodyMutation(BodyMutation.newBuilder().setStreamedResponse(StreamedBodyResponse.newBuilder()
                .setBody(chunk)
                .setEndOfStream(endOfStream))))
        .build();
  }

  static ProcessingResponse immediate(OpenAiError error, ErrorShape shape, String decisionId,
      Map<String, String> extraHeaders) {
    HeaderMutation.Builder headers = HeaderMutation.newBuilder()
        .addSetHeaders(header("content-type", "application/json"));
    if (decisionId != null) {
      headers.addSetHeaders(header(Headers.DECISION, decisionId));
    }
    extraHeaders.forEach((k, v) -> headers.addSetHeaders(header(k, v)));
    return ProcessingResponse.newBuilder()
        .setImmediateResponse(ImmediateResponse.newBuilder()
            .setStatus(HttpStatus.newBuilder().setCodeValue(error.status()))
            .setHeaders(headers)
            .setBody(ByteString.copyFromUtf8(shape.body(error)))
            .setDetails("kvrouter_" + error.code()))
        .build();
  }

  static HeaderValueOption header(String key, String value) {
    return HeaderValueOption.newBuilder()
        .setHeader(HeaderValue.newBuilder().setKey(key).setRawValue(ByteString.copyFromUtf8(value)))
        .setAppendAction(HeaderValueOption.HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD)
        .build();
  }

  /**
   * {@code {"envoy.lb": {"x-gateway-destination-endpoint": "ip:port", "x-kvrouter-decision": "<id>"}}}: the GIE
   * endpoint-picker metadata, plus the decision id, which Envoy forwards to the response observer filter
   * ({@code metadata_options.forwarding_namespaces}) so it needs no request headers of its own. Without a decision
   * ({@code decisionId} null: a request sent on to a worker without one), the destination alone.
   */
  static Struct lbMetadata(String endpoint, String decisionId) {
    Struct.Builder lb = Struct.newBuilder()
        .putFields(Headers.DESTINATION_ENDPOINT, Value.newBuilder().setStringValue(endpoint).build());
    if (decisionId != null) {
      lb.putFields(Headers.DECISION, Value.newBuilder().setStringValue(decisionId).build());
    }
    return Struct.newBuilder().putFields(LB_NAMESPACE, Value.newBuilder().setStructValue(lb).build()).build();
  }

  /** The destination headers naming {@code worker}: its cluster ({@code envoy.yaml}) and address (ORIGINAL_DST). */
  static HeaderMutation.Builder destination(Worker worker) {
    return HeaderMutation.newBuilder()
        .addSetHeaders(header(Headers.CLUSTER, worker.clusterName()))
        .addSetHeaders(header(Headers.DESTINATION_ENDPOINT, worker.endpoint()));
  }

  /** The decision id Envoy forwarded in {@code envoy.lb} metadata, or null. */
  static String forwardedDecision(io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest req) {
    var lb = DeferredMetadata.metadata(req).getFilterMetadataMap().get(LB_NAMESPACE);
    if (lb == null) {
      return null;
    }
    Value v = lb.getFieldsMap().get(Headers.DECISION);
    return v == null || !v.hasStringValue() ? null : v.getStringValue();
  }

  /** Header value as Envoy sends it: {@code raw_value} in current versions, {@code value} in older ones. */
  static String value(HeaderValue h) {
    return h.getRawValue().isEmpty() ? h.getValue() : h.getRawValue().toString(StandardCharsets.UTF_8);
  }

  /**
   * As {@link #header}, decoded strictly: lenient decoding turns every byte that is not UTF-8 into U+FFFD, so values
   * that differ (a Latin-1 "caf\u00e9" and "caf\u00e8") would read as one.
   *
   * @throws CharacterCodingException when the value's bytes are not UTF-8
   */
  static String exactHeader(HttpHeaders headers, String name) throws CharacterCodingException {
    HeaderValue h = find(headers, name);
    if (h == null || h.getRawValue().isEmpty()) {
      return h == null ? null : h.getValue();
    }
    return StandardCharsets.UTF_8.newDecoder().decode(h.getRawValue().asReadOnlyByteBuffer()).toString();
  }

  static String header(HttpHeaders headers, String name) {
    HeaderValue h = find(headers, name);
    return h == null ? null : value(h);
  }

  private static HeaderValue find(HttpHeaders headers, String name) {
    for (HeaderValue h : headers.getHeaders().getHeadersList()) {
      if (h.getKey().equals(name)) {
        return h;
      }
    }
    return null;
  }
}
