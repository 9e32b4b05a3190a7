package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.fake.FakeWorker;
import dev.kvrouter.extproc.model.ResourceState;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.time.Duration;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Media requests through real Envoy to workers that publish no KV events (the router's approximate mode, as for a
 * vLLM started without {@code --kv-events-config}), with the model configured as in a user's kvrouter.yaml
 * ({@code multimodal: {preset: gemma3}} on Gemma 3's real tokenizer and template): the router reproduces them
 * (no {@code multimodal} fallback), and on its own predicted entries alone a repeat of the same image goes to the
 * worker it was sent to, and a different image behind the same text matches only the blocks before the image.
 * {@link MultimodalRoutingE2eTest} runs the same requests against simulated vLLM workers that publish events.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MultimodalPredictedRoutingE2eTest {

  static final String TEXT = "Please describe the chart below in detail: the axes, the trend of each series, and any "
      + "annotation written on it, then say what the data suggests about the cache hit rate of each worker.";
  Stack stack;

  @BeforeAll
  void start() throws Exception {
    var gemma = Stack.ROOT.resolve(".cache/tokenizers/gemma3");
    assertThat(Files.exists(gemma.resolve("tokenizer.json")))
        .as("%s is missing: run `bash scripts/fetch-tokenizers.sh`", gemma).isTrue();
    stack = new Stack("envoy.yaml", 3, 0, "routing: {policy: kv_aware}", new Stack.Options(
        "models:\n  - {name: " + Stack.MODEL + ", tokenizer: " + gemma + ", multimodal: {preset: gemma3}}\n",
        Map.of(), y -> y));
    // the model loads in the background at start; until then requests are (correctly) routed by load
    assertThat(stack.runtime.models().await(Stack.MODEL, Duration.ofSeconds(60)))
        .isInstanceOf(ResourceState.Ready.class);
  }

  @AfterAll
  void stop() {
    if (stack != null) {
      stack.close();
    }
  }

  static String body(String uuid) {
    return "{\"model\":\"" + Stack.MODEL + "\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":["
        + "{\"type\":\"text\",\"text\":\"" + TEXT + "\"},{\"type\":\"image_url\",\"image_url\":{\"url\":"
        + "\"https://example.com/chart.png\"},\"uuid\":\"" + uuid + "\"}]}]}";
  }

  String metrics() throws Exception {
    return stack.routerMetrics();
  }

  double chosenOverlapBlocks() throws Exception {
    return LoadAccountingE2eTest.sample(metrics(), "kvrouter_routing_chosen_overlap_blocks_sum");
  }

  String send(String body) throws Exception {
    HttpResponse<String> r = stack.post("/v1/chat/completions", body, Map.of());
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    return r.headers().firstValue(FakeWorker.SERVED_BY).orElseThrow();
  }

  @Test
  void imagesAreReproducedAndRouteToTheirHolder() throws Exception {
    String first = send(body("chart-a"));
    Set<String> repeats = new HashSet<>();
    double before = chosenOverlapBlocks();
    repeats.add(send(body("chart-a")));
    double sameImage = chosenOverlapBlocks() - before;
    for (int i = 0; i < 4; i++) {
      repeats.add(send(body("chart-a")));
    }
    assertThat(repeats).as("every repeat of the image goes where it was first sent").containsExactly(first);
    // 260 tokens per image plus the text: the whole prompt is credited to its holder
    assertThat(sameImage).as("blocks the holder has of the repeat").isGreaterThanOrEqualTo(17);

    double beforeOther = chosenOverlapBlocks();
    send(body("chart-b"));
    double otherImage = chosenOverlapBlocks() - beforeOther;
    assertThat(otherImage).as("another image: only the text before it matches").isPositive().isLessThan(sameImage);

    String m = metrics();
    assertThat(LoadAccountingE2eTest.sample(m, "kvrouter_prompt_unavailable_total{reason=\"multimodal\""))
        .as("media requests were reproduced, not routed by load").isZero();
    // audio has no expansion for this model: routed by load, visibly
    String audio = "{\"model\":\"" + Stack.MODEL + "\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":"
        + "[{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"AAAA\",\"format\":\"wav\"}}]}]}";
    send(audio);
    assertThat(LoadAccountingE2eTest.sample(metrics(), "kvrouter_prompt_unavailable_total{reason=\"multimodal\""))
        .isEqualTo(1);
  }
}
