package dev.kvrouter.extproc.server;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.UnknownFieldSet;
import com.google.protobuf.WireFormat;
import io.envoyproxy.envoy.config.core.v3.Metadata;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.KnownLength;
import io.grpc.MethodDescriptor;
import io.grpc.ServerCallHandler;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import java.io.IOException;
import java.io.InputStream;
import java.util.List;

/**
 * Reads Envoy's {@code ProcessingRequest}s with their {@code metadata_context} left as bytes, parsed only by whoever
 * asks for it ({@link #metadata}). Envoy forwards the {@code forwarding_namespaces} metadata on every message of a
 * stream, with no option to send it once, and the response observer needs it only to claim its decision on the
 * first: parsing it on every response chunk (a map of structs per message, {@code MapFieldBuilder.build} a top-3
 * frame in streamed runs) was wasted work.
 *
 * <p>Byte fields (the bodies) alias the message's own array instead of being copied out of it: the array is read
 * fresh for each message and never written again.
 */
final class DeferredMetadata implements MethodDescriptor.Marshaller<ProcessingRequest> {

  private static final int FIELD = ProcessingRequest.METADATA_CONTEXT_FIELD_NUMBER;

  /** {@code service} (the ext_proc service) reading its requests through this marshaller. */
  @SuppressWarnings("unchecked")
  static ServerServiceDefinition applyTo(ServerServiceDefinition service) {
    MethodDescriptor<ProcessingRequest, ProcessingResponse> process = ExternalProcessorGrpc.getProcessMethod();
    ServerServiceDefinition.Builder b = ServerServiceDefinition.builder(service.getServiceDescriptor().getName());
    for (var m : service.getMethods()) {
      if (m.getMethodDescriptor().getFullMethodName().equals(process.getFullMethodName())) {
        b.addMethod(process.toBuilder(new DeferredMetadata(), process.getResponseMarshaller()).build(),
            (ServerCallHandler<ProcessingRequest, ProcessingResponse>) m.getServerCallHandler());
      } else {
        b.addMethod(m);
      }
    }
    return b.build();
  }

  /**
   * The metadata Envoy forwarded with {@code req}, parsed now if this marshaller kept it as bytes; empty if none.
   */
  static Metadata metadata(ProcessingRequest req) {
    if (req.hasMetadataContext()) {
      return req.getMetadataContext();
    }
    List<ByteString> kept = deferred(req);
    if (kept.isEmpty()) {
      return Metadata.getDefaultInstance();
    }
    try {
      return Metadata.parseFrom(kept.get(0));
    } catch (InvalidProtocolBufferException e) {
      return Metadata.getDefaultInstance(); // as a request without metadata: no decision to claim
    }
  }

  /** Bytes of metadata {@link #metadata} parses for {@code req} (0 if it was parsed with the message). */
  static int deferredSize(ProcessingRequest req) {
    List<ByteString> kept = deferred(req);
    return kept.isEmpty() ? 0 : kept.get(0).size();
  }

  private static List<ByteString> deferred(ProcessingRequest req) {
    UnknownFieldSet.Field f = req.getUnknownFields().getField(FIELD);
    return f == null ? List.of() : f.getLengthDelimitedList();
  }

  @Override
  public InputStream stream(ProcessingRequest value) {
    return value.toByteString().newInput(); // only clients send requests; the router never does
  }

  @Override
  public ProcessingRequest parse(InputStream stream) {
    try {
      byte[] buf = stream instanceof KnownLength ? stream.readNBytes(stream.available()) : stream.readAllBytes();
      // Find the metadata field: the others are skipped whole, bodies included, without parsing them.
      CodedInputStream scan = CodedInputStream.newInstance(buf);
      int start = -1;
      int end = -1;
      for (int at = 0, tag; (tag = scan.readTag()) != 0; at = scan.getTotalBytesRead()) {
        scan.skipField(tag);
        if (WireFormat.getTagFieldNumber(tag) == FIELD) {
          if (start >= 0) { // sent twice: protobuf would merge the two; parse as a whole
            start = -1;
            break;
          }
          start = at;
          end = scan.getTotalBytesRead();
        }
      }
      ProcessingRequest.Builder b = ProcessingRequest.newBuilder();
      if (start < 0) {
        return b.mergeFrom(aliasing(buf, 0, buf.length)).build();
      }
      b.mergeFrom(aliasing(buf, 0, start)).mergeFrom(aliasing(buf, end, buf.length - end));
      CodedInputStream field = aliasing(buf, start, end - start);
      field.readTag();
      return b.mergeUnknownFields(UnknownFieldSet.newBuilder()
          .addField(FIELD, UnknownFieldSet.Field.newBuilder().addLengthDelimited(field.readBytes()).build())
          .build()).build();
    } catch (IOException e) {
      throw Status.INTERNAL.withDescription("invalid ext_proc request").withCause(e).asRuntimeException();
    }
  }

  private static CodedInputStream aliasing(byte[] buf, int off, int len) {
    CodedInputStream in = CodedInputStream.newInstance(buf, off, len);
    in.enableAliasing(true);
    return in;
  }
}
