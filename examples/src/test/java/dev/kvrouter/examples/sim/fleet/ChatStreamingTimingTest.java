package dev.kvrouter.examples.sim.fleet;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.sim.media.MediaRequests;
import dev.kvrouter.examples.sim.testing.Fixtures;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A streamed chat answer's first body chunk, the role chunk, leaves with the first token as vLLM writes it (in
 * the first iteration over the engine's outputs), not when the request is accepted: the router's load ledger takes
 * the first body chunk for the end of the prefill. On a Gemma 3 preset, slowed down so that the prefill (vision
 * encoder included) takes most of a second.
 */
@Timeout(120)
class ChatStreamingTimingTest {

  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void theRoleChunkLeavesWithTheFirstTokenNotAtAcceptance() throws Exception {
    Path gemma = Fixtures.tokenizer("gemma3");
    FleetConfig fc = MultimodalFleetTest.parse("--workers", "1", "--http-base-port", "0", "--events-base-port", "0",
        "--replay-base-port", "0", "--multimodal", "gemma3", "--tokenizer", gemma.toString(), "--model",
        "google/gemma-3-12b-it", "--preset", "gemma3-12b-h100", "--num-gpu-blocks", "512", "--max-model-len", "4096",
        "--slowdown", "20", "--seed", "5");
    assertThat(fc.engineConfig(0).model()).isEqualTo("google/gemma-3-12b-it");
    try (SimFleet fleet = SimFleet.start(fc)) {
      SimWorker w = fleet.workers().get(0);
      ObjectNode body = MediaRequests.image("google/gemma-3-12b-it", "https://example.com/a.png", "img-a");
      body.put("stream", true).put("max_tokens", 3);
      long start = System.nanoTime();
      HttpResponse<InputStream> r = MultimodalFleetTest.CLIENT.send(HttpRequest.newBuilder(
              URI.create("http://127.0.0.1:" + w.httpPort() + "/v1/chat/completions"))
          .timeout(Duration.ofSeconds(60)).header("content-type", "application/json")
          .POST(HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(body))).build(),
          HttpResponse.BodyHandlers.ofInputStream());
      long headersMs = (System.nanoTime() - start) / 1_000_000;
      assertThat(r.statusCode()).isEqualTo(200);
      List<Long> at = new ArrayList<>();
      List<String> data = new ArrayList<>();
      try (BufferedReader in = new BufferedReader(new InputStreamReader(r.body(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = in.readLine()) != null) {
          if (line.startsWith("data: ")) {
            at.add((System.nanoTime() - start) / 1_000_000);
            data.add(line.substring(6));
          }
        }
      }
      JsonNode role = JSON.readTree(data.get(0)).path("choices").path(0).path("delta");
      assertThat(role.path("role").asText()).isEqualTo("assistant");
      assertThat(JSON.readTree(data.get(1)).path("choices").path(0).path("delta").path("content").asText())
          .as("the first token").isNotEmpty();
      // 12B prefill of ~280 tokens plus one image encode: about 25 ms on the preset, 500 ms at 20x
      assertThat(at.get(0)).as("role chunk ms, headers at %d ms", headersMs).isGreaterThanOrEqualTo(300);
      assertThat(at.get(1) - at.get(0)).as("role chunk and first token leave together").isLessThan(150);
      assertThat(headersMs).as("headers at acceptance").isLessThan(at.get(0));
    }
  }
}
