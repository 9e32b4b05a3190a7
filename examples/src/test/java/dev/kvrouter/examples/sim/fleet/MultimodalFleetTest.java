package dev.kvrouter.examples.sim.fleet;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.sim.media.MediaRequests;
import dev.kvrouter.examples.sim.testing.Fixtures;
import dev.kvrouter.xds.registry.Worker;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code kvrouter-sim --multimodal}: the option becomes the router's {@code multimodal: {preset: ...}} spec on the
 * fleet, and a worker started from it serves Gemma 3 image requests (cache hit on a repeated uuid) while the timing
 * preset stays the text one.
 */
@Timeout(120)
class MultimodalFleetTest {

  static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  static FleetConfig parse(String... args) {
    SimFleetMain main = new SimFleetMain();
    new CommandLine(main).parseArgs(args);
    return main.fleetConfig();
  }

  @Test
  void theOptionStartsWorkersThatServeImagesFromTheirCache() throws Exception {
    Path gemma = Fixtures.tokenizer("gemma3");
    FleetConfig fc = parse("--workers", "1", "--http-base-port", "0", "--events-base-port", "0",
        "--replay-base-port", "0", "--multimodal", "gemma3", "--tokenizer", gemma.toString(), "--model",
        "google/gemma-3-4b-it", "--num-gpu-blocks", "512", "--max-model-len", "4096", "--seed", "3");
    assertThat(fc.multimodal().preset()).isEqualTo("gemma3");
    assertThat(fc.preset().id()).as("timing stays the text preset").isEqualTo("llama3.1-8b-h100");
    assertThat(fc.engineConfig(0).vocabSize()).as("Gemma 3's vocabulary, not Llama's").isEqualTo(262_208);
    assertThat(fc.engineConfig(0).model()).isEqualTo("google/gemma-3-4b-it");

    try (SimFleet fleet = SimFleet.start(fc)) {
      SimWorker w = fleet.workers().get(0);
      ObjectNode image = MediaRequests.image("google/gemma-3-4b-it", "https://example.com/chart.png", "chart-a");
      JsonNode first = chat(w, image, 200);
      int prompt = first.get("usage").get("prompt_tokens").asInt();
      assertThat(prompt).as("text plus Gemma 3's 260 image tokens").isGreaterThan(260);
      assertThat(cached(first)).isZero();
      assertThat(cached(chat(w, image, 200))).as("the same uuid again: every block but the last from cache")
          .isEqualTo((prompt - 1) / 16 * 16);
      JsonNode audio = chat(w, MediaRequests.audio("google/gemma-3-4b-it"), 400);
      assertThat(audio.get("error").get("message").asText()).contains("does not support audio input");

      Worker entry = fleet.registryEntries().get(0);
      assertThat(entry.labels()).containsEntry("multimodal", "gemma3").containsEntry("preset", "llama3.1-8b-h100");
      assertThat(entry.model()).isEqualTo("google/gemma-3-4b-it");
    }
  }

  @Test
  void withoutTheOptionTheSameModelRefusesImages() throws Exception {
    Path gemma = Fixtures.tokenizer("gemma3");
    FleetConfig fc = parse("--workers", "1", "--http-base-port", "0", "--events-base-port", "0",
        "--replay-base-port", "0", "--tokenizer", gemma.toString(), "--model", "gemma", "--num-gpu-blocks", "64",
        "--max-model-len", "4096");
    assertThat(fc.multimodal()).isNull();
    try (SimFleet fleet = SimFleet.start(fc)) {
      JsonNode r = chat(fleet.workers().get(0), MediaRequests.image("gemma", "https://x/a.png", "a"), 400);
      assertThat(r.get("error").get("message").asText()).contains("does not support image input");
    }
  }

  @Test
  void theOptionNeedsTheModelsTokenizerAndNameAndAKnownPreset() {
    assertThatThrownBy(() -> parse("--multimodal", "gemma3", "--model", "g"))
        .hasMessageContaining("--multimodal needs --tokenizer");
    assertThatThrownBy(() -> parse("--multimodal", "gemma3", "--tokenizer", "/tmp/x"))
        .hasMessageContaining("--model");
    assertThatThrownBy(() -> parse("--multimodal", "qwen-vl", "--tokenizer", "/tmp/x", "--model", "q"))
        .hasMessageContaining("unknown multimodal preset `qwen-vl`").hasMessageContaining("gemma3");
    assertThat(parse().multimodal()).isNull();

    // the command reports the problem and exits with 2, starting nothing
    PrintStream saved = System.err;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
    try {
      assertThat(new CommandLine(new SimFleetMain()).execute("--multimodal", "gemma3")).isEqualTo(2);
    } finally {
      System.setErr(saved);
    }
    assertThat(captured.toString(StandardCharsets.UTF_8)).contains("--multimodal needs --tokenizer");
  }

  @Test
  void aYamlConfigCanNameTheMultimodalPreset(@TempDir Path dir) throws Exception {
    Path cfg = dir.resolve("sim.yaml");
    Files.writeString(cfg, "multimodal: gemma3\nmodel: google/gemma-3-4b-it\ntokenizer: "
        + Fixtures.tokenizer("gemma3") + "\n");
    SimFleetMain main = new SimFleetMain();
    CommandLine cl = new CommandLine(main);
    cl.setDefaultValueProvider(SimFleetMain.yamlDefaults(cfg));
    cl.parseArgs("--config", cfg.toString());
    assertThat(main.fleetConfig().multimodal().preset()).isEqualTo("gemma3");
  }

  static JsonNode chat(SimWorker w, ObjectNode body, int status) throws Exception {
    HttpResponse<String> r = CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + w.httpPort()
        + "/v1/chat/completions")).timeout(Duration.ofSeconds(30)).header("content-type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(body))).build(),
        HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).as(r.body()).isEqualTo(status);
    return JSON.readTree(r.body());
  }

  static int cached(JsonNode response) {
    return response.get("usage").get("prompt_tokens_details").get("cached_tokens").asInt();
  }

  static final ObjectMapper JSON = new ObjectMapper();

}
