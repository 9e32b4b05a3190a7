package dev.kvrouter.extproc.server;

import com.google.protobuf.ByteString;
import io.envoyproxy.envoy.config.core.v3.Metadata;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.grpc.MethodDescriptor;
import java.lang.management.ManagementFactory;

/** Bytes allocated parsing one observer token message (a 180-byte SSE chunk with envoy.lb metadata). */
public class AllocProbe {
  static final class Known extends java.io.ByteArrayInputStream implements io.grpc.KnownLength {
    Known(byte[] b) {
      super(b);
    }
  }

  public static void main(String[] a) throws Exception {
    var lb = EnvoyMessages.lbMetadata("127.0.0.1:18001", "0f3c2a9e-7d41-4c1b-9a55-2b6f4e8d1c07");
    Metadata md = Metadata.newBuilder().putFilterMetadata("envoy.lb",
        lb.getFieldsOrThrow("envoy.lb").getStructValue()).build();
    String sse = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
        + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\" token\"},\"finish_reason\":null}]}\n\n";
    ProcessingRequest req = ProcessingRequest.newBuilder().setObservabilityMode(true).setMetadataContext(md)
        .setResponseBody(HttpBody.newBuilder().setBody(ByteString.copyFromUtf8(sse))).build();
    byte[] wire = req.toByteArray();
    MethodDescriptor.Marshaller<ProcessingRequest> def = ExternalProcessorGrpc.getProcessMethod().getRequestMarshaller();
    MethodDescriptor.Marshaller<ProcessingRequest> deferred = new DeferredMetadata();
    var mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    long tid = Thread.currentThread().getId();
    int n = 200_000;
    for (int round = 0; round < 3; round++) {
      for (var m : new Object[][] {{"default", def}, {"deferred", deferred}}) {
        @SuppressWarnings("unchecked") var mm = (MethodDescriptor.Marshaller<ProcessingRequest>) m[1];
        long sink = 0;
        long b0 = mx.getThreadAllocatedBytes(tid);
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
          // as gRPC hands it over: a KnownLength stream over the frame's bytes
          sink += mm.parse(new Known(wire)).getResponseBody().getBody().size();
        }
        long t1 = System.nanoTime();
        long b1 = mx.getThreadAllocatedBytes(tid);
        if (round == 2) {
          System.out.printf("%s: %d wire bytes, %.0f B allocated/message, %.0f ns/message (sink %d)%n", m[0],
              wire.length, (b1 - b0) / (double) n, (t1 - t0) / (double) n, sink);
        }
      }
    }
  }
}
