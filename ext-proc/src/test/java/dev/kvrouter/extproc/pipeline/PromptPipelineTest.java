package dev.kvrouter.extproc.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.PreparedRequest;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.routing.KvIndexOverlapSource;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.extproc.tokenize.Tokenizer;
import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.block.BlockHasher;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PromptPipelineTest {

  static final int BLOCK = 16;
  ModelRegistry registry;
  RequestPreparer preparer;
  final SimpleMeterRegistry meters = new SimpleMeterRegistry();

  @BeforeAll
  void load() throws Exception {
    registry = PipelineFixtures.registry(BLOCK);
    preparer = PipelineFixtures.preparer(registry);
  }

  @AfterAll
  void close() {
    registry.close();
  }

  PreparedRequest prepare(InferenceRequest.Kind kind, String json) throws Exception {
    byte[] b = json.getBytes(StandardCharsets.UTF_8);
    return preparer.prepare(kind, b, b.length, null);
  }

  Tokenizer tokenizer(String model) {
    return registry.resolve(model).resources(PipelineResources.class).orElseThrow().tokenizer();
  }

  static String prose(int sentences) {
    StringBuilder b = new StringBuilder();
    String[] words = {"cache", "router", "prefix", "block", "worker", "token", "envoy", "latency", "queue", "model"};
    for (int i = 0; i < sentences; i++) {
      b.append("The ").append(words[i % 10]).append(" sees ").append(words[(i * 7) % 10]).append(" number ")
          .append(i).append(". ");
    }
    return b.toString();
  }

  @Test
  void tokenIdPromptsAreHashedAsGiven() throws Exception {
    PromptPipeline p = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, true, meters);
    PreparedRequest pr = prepare(InferenceRequest.Kind.COMPLETIONS,
        "{\"model\":\"qwen3\",\"prompt\":[" + String.join(",", java.util.Collections.nCopies(40, "7")) + "]}");
    PromptPipeline.Outcome o = p.run(pr);
    int[] ids = new int[40];
    Arrays.fill(ids, 7);
    assertThat(o.prompt().tokens()).isEqualTo(40);
    assertThat(o.prompt().blockHashes())
        .containsExactly(BlockHasher.hashFullBlocks(pr.scope().namespace().rootSeed(), ids, 40, BLOCK));
  }

  @Test
  void completionTextGetsTheModelsSpecialTokensAsVllmAddsThem() throws Exception {
    PromptPipeline p = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, false, meters);
    String text = prose(20);
    PreparedRequest pr = prepare(InferenceRequest.Kind.COMPLETIONS,
        "{\"model\":\"llama3_1\",\"prompt\":\"" + text + "\"}");
    int[] ids = tokenizer("llama3_1").encode(text, true);
    assertThat(ids[0]).as("BOS").isEqualTo(128000);
    PromptPipeline.Outcome o = p.run(pr);
    assertThat(o.prompt().tokens()).isEqualTo(ids.length);
    assertThat(o.prompt().blockHashes()).containsExactly(
        BlockHasher.hashFullBlocks(pr.scope().namespace().rootSeed(), ids, ids.length, BLOCK));
  }

  @Test
  void truncationKeepsTheLastTokensAsVllmDoes() throws Exception {
    PromptPipeline p = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, true, meters);
    String text = prose(30);
    PreparedRequest pr = prepare(InferenceRequest.Kind.COMPLETIONS,
        "{\"model\":\"qwen3\",\"prompt\":\"" + text + "\",\"truncate_prompt_tokens\":50}");
    int[] all = tokenizer("qwen3").encode(text, true);
    int[] last = Arrays.copyOfRange(all, all.length - 50, all.length);
    PromptPipeline.Outcome o = p.run(pr);
    assertThat(o.prompt().tokens()).isEqualTo(50);
    assertThat(o.prompt().blockHashes())
        .containsExactly(BlockHasher.hashFullBlocks(pr.scope().namespace().rootSeed(), last, 50, BLOCK));
  }

  @Test
  void earlyStopTokenizesOnlyUpToTheFirstUnheldBlockThenFinishesTheChainForTheChosenWorker() throws Exception {
    KvIndex index = new KvIndex(IndexConfig.defaults(), Clock.systemUTC());
    KvIndexOverlapSource overlaps = new KvIndexOverlapSource(index);
    List<Runnable> background = new ArrayList<>();
    PromptPipeline p = new PromptPipeline(overlaps, background::add, System::nanoTime, true, meters);
    String text = prose(400); // about 4k tokens
    PreparedRequest pr = prepare(InferenceRequest.Kind.CHAT,
        "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"user\",\"content\":\"" + text + "\"}]}");
    // What the engine will see: the rendered prompt's tokens and their chain.
    PromptPipeline exact = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, false,
        meters);
    long[] full = exact.run(pr).prompt().blockHashes();
    int fullTokens = exact.run(pr).prompt().tokens();
    assertThat(full.length).isGreaterThan(200);

    WorkerId holder = WorkerId.of("holder");
    index.predict(holder, full, 3); // a worker holds the first three blocks
    index.maintain();

    PromptPipeline.Outcome o = p.run(pr);
    assertThat(o.prompt().blockHashes()).as("three held blocks and the first one nobody holds").hasSize(4)
        .containsExactly(Arrays.copyOf(full, 4));
    assertThat((double) o.prompt().tokens()).as("estimated prompt length").isBetween(0.7 * fullTokens,
        1.3 * fullTokens);
    assertThat(meters.counter("kvrouter_prompt_early_stops_total").count()).isPositive();

    WorkerId chosen = WorkerId.of("chosen");
    o.complete(chosen);
    assertThat(background).hasSize(1);
    background.get(0).run(); // the rest of the prompt, off the request path
    index.maintain();
    assertThat(overlaps.lookup(full).overlap(chosen).predicted()).as("the whole chain is now predicted")
        .isEqualTo(full.length);
  }

  @Test
  void earlyStoppedPromptsWaitingForTheBackgroundHoldBoundedBytes() throws Exception {
    // Each queued completion holds its whole prompt (text and tokenizer cursor) after the body's bytes went back to
    // the body budget; the single background thread's queue was bounded in tasks only (1,024), so a client sending
    // long novel prompts faster than one thread tokenizes them could park 1,024 of them, up to 8 MiB each.
    SimpleMeterRegistry own = new SimpleMeterRegistry();
    List<Runnable> background = new ArrayList<>(); // the background thread busy: nothing it is given runs yet
    PromptPipeline p = new PromptPipeline(PrefixOverlapSource.NONE, background::add, System::nanoTime, true, own);
    String text = prose(36_000); // about 1 MiB
    byte[] body = ("{\"model\":\"qwen3\",\"prompt\":\"" + text + "\"}").getBytes(StandardCharsets.UTF_8);
    int sent = 100;
    for (int i = 0; i < sent; i++) {
      PromptPipeline.Outcome o = p.run(preparer.prepare(InferenceRequest.Kind.COMPLETIONS, body, body.length, null));
      assertThat(o.prompt().blockHashes()).as("stopped at the first block nobody holds").hasSize(1);
      o.complete(WorkerId.of("w"));
    }
    assertThat(background.size()).as("completions queued").isLessThan(sent / 2);
    double queued = own.get("kvrouter_prompt_completions_queued_bytes").gauge().value();
    assertThat(queued).as("what the queued completions hold").isPositive().isLessThanOrEqualTo(64 << 20);
    assertThat(own.counter("kvrouter_prompt_completions_dropped_total").count()).isEqualTo(sent - background.size());
    background.forEach(Runnable::run);
    assertThat(own.get("kvrouter_prompt_completions_queued_bytes").gauge().value()).as("given back once run")
        .isZero();
  }

  @Test
  void anEarlyStoppedPromptKeepsItsTokensWhileItsThreadServesTheNextRequests() throws Exception {
    // The token buffer a thread reuses goes with an early-stopped cursor; the thread's next requests must not
    // write into it before the background finishes the chain.
    KvIndex index = new KvIndex(IndexConfig.defaults(), Clock.systemUTC());
    KvIndexOverlapSource overlaps = new KvIndexOverlapSource(index);
    List<Runnable> background = new ArrayList<>();
    PromptPipeline p = new PromptPipeline(overlaps, background::add, System::nanoTime, true, meters);
    PromptPipeline exact = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, false,
        meters);
    PreparedRequest first = prepare(InferenceRequest.Kind.CHAT,
        "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"user\",\"content\":\"" + prose(300) + "\"}]}");
    long[] full = exact.run(first).prompt().blockHashes();
    index.predict(WorkerId.of("holder"), full, 2);
    index.maintain();

    PromptPipeline.Outcome stopped = p.run(first);
    assertThat(stopped.prompt().blockHashes()).hasSize(3);
    WorkerId chosen = WorkerId.of("chosen");
    stopped.complete(chosen);
    // Meanwhile the same thread serves other prompts, longer and shorter, through both pipelines.
    for (int sentences : new int[] {500, 40, 300}) {
      PreparedRequest other = prepare(InferenceRequest.Kind.CHAT, "{\"model\":\"qwen3\",\"messages\":["
          + "{\"role\":\"user\",\"content\":\"Other: " + prose(sentences) + "\"}]}");
      assertThat(exact.run(other).prompt().blockHashes()).isNotEmpty();
      p.run(other);
    }
    assertThat(background).isNotEmpty();
    background.get(0).run();
    index.maintain();
    assertThat(overlaps.lookup(full).overlap(chosen).predicted()).as("the first prompt's chain, unharmed")
        .isEqualTo(full.length);
  }

  @Test
  void consecutiveRequestsOnOneThreadHashExactlyWhateverCameBefore() throws Exception {
    PromptPipeline p = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, false, meters);
    Tokenizer qwen = tokenizer("qwen3");
    for (int sentences : new int[] {600, 5, 250, 1, 600}) {
      String text = prose(sentences);
      PreparedRequest pr = prepare(InferenceRequest.Kind.COMPLETIONS,
          "{\"model\":\"qwen3\",\"prompt\":\"" + text + "\"}");
      int[] ids = qwen.encode(text, true);
      PromptPipeline.Outcome o = p.run(pr);
      assertThat(o.prompt().tokens()).isEqualTo(ids.length);
      assertThat(o.prompt().blockHashes()).as("%d sentences", sentences)
          .containsExactly(BlockHasher.hashFullBlocks(pr.scope().namespace().rootSeed(), ids, ids.length, BLOCK));
    }
  }

  /**
   * A Responses conversation's next turn (same instructions, the earlier items and the answer, then a new user item)
   * finds the worker that served the first turn holding its prefix, as a chat conversation's does: the Responses
   * prompt is the chat prompt vLLM renders, so both spell the same blocks.
   */
  @Test
  void aResponsesConversationsNextTurnOverlapsTheWorkerThatServedTheFirst() throws Exception {
    KvIndex index = new KvIndex(IndexConfig.defaults(), Clock.systemUTC());
    KvIndexOverlapSource overlaps = new KvIndexOverlapSource(index);
    PromptPipeline p = new PromptPipeline(overlaps, Runnable::run, System::nanoTime, false, meters);
    String instructions = prose(60);
    String firstItems = "{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"" + prose(40)
        + "\"}]}";
    PreparedRequest first = prepare(InferenceRequest.Kind.RESPONSES, "{\"model\":\"qwen3\",\"instructions\":\""
        + instructions + "\",\"input\":[" + firstItems + "]}");
    PromptPipeline.Outcome o1 = p.run(first);
    assertThat(o1.unavailable()).isNull();
    long[] firstBlocks = o1.prompt().blockHashes();
    assertThat(firstBlocks.length).isGreaterThan(20);
    WorkerId served = WorkerId.of("served-first-turn");
    index.predict(served, firstBlocks, firstBlocks.length); // as routing the first turn there records it
    index.maintain();

    String next = "{\"model\":\"qwen3\",\"instructions\":\"" + instructions + "\",\"input\":[" + firstItems
        + ",{\"type\":\"message\",\"role\":\"assistant\",\"status\":\"completed\",\"content\":[{\"type\":"
        + "\"output_text\",\"text\":\"Noted.\"}]},{\"role\":\"user\",\"content\":\"And then?\"}]}";
    PromptPipeline.Outcome o2 = p.run(prepare(InferenceRequest.Kind.RESPONSES, next));
    long[] nextBlocks = o2.prompt().blockHashes();
    // the generation prompt ends the first turn's text, so its last block may differ from the continuation's
    int shared = firstBlocks.length - 1;
    assertThat(Arrays.copyOf(nextBlocks, shared)).isEqualTo(Arrays.copyOf(firstBlocks, shared));
    assertThat(overlaps.lookup(nextBlocks).overlap(served).predicted()).as("blocks the first turn left on its worker")
        .isGreaterThanOrEqualTo(shared);
    assertThat(overlaps.lookup(nextBlocks).overlap(WorkerId.of("elsewhere")).predicted()).isZero();

    String chat = "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"system\",\"content\":\"" + instructions
        + "\"}," + firstItems.replace("input_text", "text") + ",{\"role\":\"assistant\",\"content\":\"Noted.\"},"
        + "{\"role\":\"user\",\"content\":\"And then?\"}]}";
    PromptPipeline exact = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, false,
        meters);
    assertThat(exact.run(prepare(InferenceRequest.Kind.CHAT, chat)).prompt().blockHashes())
        .as("the same conversation sent as chat").isEqualTo(nextBlocks);
  }

  @Test
  void whatCannotBeReproducedIsRoutedByLoadWithAReason() throws Exception {
    PromptPipeline p = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, true, meters);
    assertThat(p.run(prepare(InferenceRequest.Kind.CHAT,
        "{\"model\":\"not-configured\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}")).unavailable())
        .isEqualTo("unknown_model");
    assertThat(p.run(prepare(InferenceRequest.Kind.CHAT, "{\"model\":\"gemma3\",\"messages\":[{\"role\":\"user\","
        + "\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://example.com/a.png\"}}]}]}"))
        .unavailable()).isEqualTo("multimodal");
    assertThat(meters.find("kvrouter_prompt_unavailable_total").tag("reason", "multimodal").counter().count())
        .isEqualTo(1);
    // no prompt at all, only embeddings (vLLM's prompt_embeds): a batch of zero prompts, not a crash
    assertThat(p.run(prepare(InferenceRequest.Kind.COMPLETIONS, "{\"model\":\"qwen3\",\"prompt_embeds\":\"AAAA\"}"))
        .unavailable()).isEqualTo("prompt_embeds");
  }

  @Test
  void aFailureIsLoggedWithoutItsMessageWhichMayQuoteThePrompt() {
    String logged = PromptPipeline.withoutMessage(new NumberFormatException("For input string: \"my secret prompt\""));
    assertThat(logged).startsWith("java.lang.NumberFormatException at ").doesNotContain("secret");
  }

  @Test
  void aTemplateThatRaisesRoutesByLoad() throws Exception {
    PromptPipeline p = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, true, meters);
    // Gemma's template raises for a conversation whose roles do not alternate.
    PromptPipeline.Outcome o = p.run(prepare(InferenceRequest.Kind.CHAT, "{\"model\":\"gemma3\",\"messages\":["
        + "{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}]}"));
    assertThat(o.prompt()).isNull();
    assertThat(o.unavailable()).isEqualTo("template_error");
  }
}
