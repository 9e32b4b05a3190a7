package dev.kvrouter.examples.sim.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.fleet.SimWorker;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.examples.workload.TokenSpace;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** A worker told to generate scripted output answers a seeded request with the script, over real HTTP. */
@Timeout(60)
class ScriptedOutputTest {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  @Test
  void parsesTheCommandLineForms() {
    assertThat(ScriptedOutput.parse("model")).isNull();
    assertThat(ScriptedOutput.parse(null)).isNull();
    assertThat(ScriptedOutput.parse("workload")).isEqualTo(new ScriptedOutput(TokenSpace.DEFAULT));
    assertThat(ScriptedOutput.parse("workload:2000..3000")).isEqualTo(new ScriptedOutput(new TokenSpace(2000, 3000)));
    assertThatThrownBy(() -> ScriptedOutput.parse("fresh")).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("model, workload or workload:LO..HI");
    assertThatThrownBy(() -> ScriptedOutput.parse("workload:9..3")).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aSeededRequestGetsTheScriptAndTheDefaultWorkerKeepsItsOwnText() throws Exception {
    TokenSpace space = new TokenSpace(5000, 6000);
    ExecutorService writer = Executors.newFixedThreadPool(2);
    EngineConfig config = EngineConfig.fromPreset(Presets.LLAMA_3_1_8B_H100, 16).numGpuBlocks(1024).seed(5).build();
    try (SimWorker scripted = SimWorker.start(new SimWorker.Spec("w-script", config,
        Presets.LLAMA_3_1_8B_H100.timingModel(), null, "127.0.0.1", 0, null, null, new ScriptedOutput(space)),
        PromptEncoder.tokenIdsOnly(), writer);
        SimWorker plain = SimWorker.start(new SimWorker.Spec("w-plain", config,
            Presets.LLAMA_3_1_8B_H100.timingModel(), null, "127.0.0.1", 0, null, null, null),
            PromptEncoder.tokenIdsOnly(), writer)) {
      long seed = -7_123_456_789_012L;
      String seeded = "{\"model\":\"" + config.model() + "\",\"prompt\":[11,12,13,14,15],\"max_tokens\":6,"
          + "\"seed\":" + seed + "}";
      StringBuilder script = new StringBuilder();
      for (int i = 0; i < 6; i++) {
        script.append("token_id:").append(space.token(seed, i));
      }
      assertThat(text(scripted, seeded)).isEqualTo(script.toString());
      // a pure function of the request: the same again, whatever the prompt
      assertThat(text(scripted, seeded.replace("11,12", "21,22"))).isEqualTo(script.toString());
      // without a seed: the token space still, fixed by the prompt
      String unseeded = "{\"model\":\"" + config.model() + "\",\"prompt\":[11,12,13,14,15],\"max_tokens\":6}";
      String a = text(scripted, unseeded);
      assertThat(a).isEqualTo(text(scripted, unseeded)).isNotEqualTo(script.toString());
      for (String t : a.split("token_id:")) {
        if (!t.isEmpty()) {
          assertThat(Integer.parseInt(t)).isBetween(5000, 5999);
        }
      }
      // the default worker is unchanged: its own readable vocabulary, whatever the seed
      assertThat(text(plain, seeded)).doesNotContain("token_id:").isNotEmpty();
    } finally {
      writer.shutdownNow();
      writer.awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  private static String text(SimWorker w, String body) throws Exception {
    HttpResponse<String> r = CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + w.httpPort()
        + "/v1/completions")).timeout(Duration.ofSeconds(30)).header("content-type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    JsonNode n = JSON.readTree(r.body());
    return n.path("choices").path(0).path("text").asText();
  }
}
