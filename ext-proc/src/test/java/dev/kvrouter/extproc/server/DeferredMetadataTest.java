package dev.kvrouter.extproc.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.envoyproxy.envoy.config.core.v3.Metadata;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import org.junit.jupiter.api.Test;

class DeferredMetadataTest {

  static final Metadata LB = Metadata.newBuilder()
      .putFilterMetadata(EnvoyMessages.LB_NAMESPACE, EnvoyMessages.lbMetadata("10.0.0.7:8000", "d-42")
          .getFieldsOrThrow(EnvoyMessages.LB_NAMESPACE).getStructValue())
      .build();

  static ProcessingRequest chunk(String body, Metadata metadata) {
    ProcessingRequest.Builder b = ProcessingRequest.newBuilder().setObservabilityMode(true)
        .setResponseBody(HttpBody.newBuilder().setBody(ByteString.copyFromUtf8(body)).setEndOfStream(true));
    return metadata == null ? b.build() : b.setMetadataContext(metadata).build();
  }

  static ProcessingRequest roundTrip(ProcessingRequest req) {
    DeferredMetadata m = new DeferredMetadata();
    return m.parse(m.stream(req));
  }

  @Test
  void theMetadataIsKeptAsBytesUntilAskedFor() {
    ProcessingRequest parsed = roundTrip(chunk("data: {\"choices\":[]}\n\n", LB));
    assertThat(parsed.hasMetadataContext()).as("not parsed with the message").isFalse();
    assertThat(parsed.getResponseBody().getBody().toStringUtf8()).isEqualTo("data: {\"choices\":[]}\n\n");
    assertThat(parsed.getResponseBody().getEndOfStream()).isTrue();
    assertThat(parsed.getObservabilityMode()).isTrue();
    assertThat(DeferredMetadata.deferredSize(parsed)).isEqualTo(LB.getSerializedSize());
    assertThat(DeferredMetadata.metadata(parsed)).isEqualTo(LB);
    assertThat(EnvoyMessages.forwardedDecision(parsed)).isEqualTo("d-42");
  }

  @Test
  void aRequestWithoutMetadataParsesWhole() {
    ProcessingRequest req = chunk("x", null);
    ProcessingRequest parsed = roundTrip(req);
    assertThat(parsed).isEqualTo(req);
    assertThat(DeferredMetadata.deferredSize(parsed)).isZero();
    assertThat(EnvoyMessages.forwardedDecision(parsed)).isNull();
  }

  @Test
  void emptyMetadataAsEnvoySendsItWithoutForwardingNamespaces() {
    ProcessingRequest parsed = roundTrip(chunk("x", Metadata.getDefaultInstance()));
    assertThat(DeferredMetadata.deferredSize(parsed)).isZero();
    assertThat(DeferredMetadata.metadata(parsed)).isEqualTo(Metadata.getDefaultInstance());
    assertThat(EnvoyMessages.forwardedDecision(parsed)).isNull();
  }
}
