package dev.kvrouter.extproc.request;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

class ResponseIdsTest {

  @Test
  void aMintedIdHasVllmsShapeAndNamesItsWorker() {
    Set<String> seen = new HashSet<>();
    for (int i = 0; i < 1000; i++) {
      String id = ResponseIds.mint("worker-" + (i % 7));
      assertThat(id).matches("resp_[0-9a-f]{32}"); // vLLM's own: f"resp_{random_uuid()}", a uuid4's hex
      assertThat(ResponseIds.tagOf(id)).isEqualTo(ResponseIds.tag("worker-" + (i % 7)));
      seen.add(id);
    }
    assertThat(seen).as("the rest is random").hasSize(1000);
    assertThat(ResponseIds.tag("a")).isNotEqualTo(ResponseIds.tag("b"));
  }

  @Test
  void idsOfAnyOtherShapeNameNoWorker() {
    String ok = ResponseIds.mint("w");
    for (String id : new String[] {null, "", "resp_", ok.toUpperCase().replace("RESP_", "resp_"), ok + "0",
        ok.substring(0, ok.length() - 1), "chatcmpl-" + ok.substring(5), "resp_" + "g".repeat(32),
        "resp_-" + ok.substring(6), "resp_\u0663" + ok.substring(6)}) { // an Arabic-Indic digit three
      assertThat(ResponseIds.tagOf(id)).as(String.valueOf(id)).isNull();
    }
  }
}
