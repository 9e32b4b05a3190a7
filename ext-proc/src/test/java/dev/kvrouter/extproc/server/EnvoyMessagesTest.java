package dev.kvrouter.extproc.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

class EnvoyMessagesTest {

  /** Every routed request gets one of these: built once, and their serialized size computed once. */
  @Test
  void theContinueAnswersAreBuiltOnce() {
    for (Supplier<ProcessingResponse> s : java.util.List.<Supplier<ProcessingResponse>>of(
        EnvoyMessages::continueRequestHeaders, EnvoyMessages::continueRequestBody,
        EnvoyMessages::continueResponseBody, EnvoyMessages::continueRequestTrailers,
        EnvoyMessages::continueResponseTrailers)) {
      ProcessingResponse r = s.get();
      assertThat(s.get()).isSameAs(r).isEqualTo(r);
      assertThat(r.getResponseCase()).isNotEqualTo(ProcessingResponse.ResponseCase.RESPONSE_NOT_SET);
    }
  }
}
