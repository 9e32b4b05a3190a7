package dev.kvrouter.e2e;

import dev.kvrouter.examples.ab.ChatFront;
import dev.kvrouter.examples.ab.EngineIdeals;
import dev.kvrouter.examples.ab.EnvoyAbStack;
import dev.kvrouter.examples.loadgen.AbRunner;
import dev.kvrouter.examples.loadgen.LoadConfig;
import dev.kvrouter.examples.loadgen.LoadGenerator;
import dev.kvrouter.examples.loadgen.PolicyPreparer;
import dev.kvrouter.examples.report.AbReport;
import dev.kvrouter.examples.sim.fleet.MultimodalModels;
import dev.kvrouter.examples.sim.http.ScriptedOutput;
import dev.kvrouter.examples.sim.timing.Presets;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;

/** A/B runs through real Envoy for the e2e tests: a small fleet, and the runner with short run time and timeouts. */
final class AbRuns {

  /** Workers of a {@link Fleet}. */
  static final int WORKERS = 4;
  /** Their KV block size. */
  static final int BS = 16;
  /** Their KV blocks each. */
  static final int GPU_BLOCKS = 4096;

  private AbRuns() {}

  /**
   * {@link #WORKERS} simulated workers of {@code model} (the llama3.1-8b-h100 timing, its real tokenizer and chat
   * template), the router in process, Envoy; and the same model's request path for the ideals.
   */
  record Fleet(String model, EnvoyAbStack stack, ChatFront chat) implements AutoCloseable {

    /**
     * @param tokenizer the name under {@code .cache/tokenizers}
     * @param multimodal the router's and workers' multimodal preset, or null
     * @param scripted the workers' scripted output
     */
    static Fleet start(String model, String tokenizer, String multimodal, long seed, ScriptedOutput scripted)
        throws Exception {
      return start(model, tokenizer, multimodal, seed, scripted, EnvoyAbStack.Routers.ONE);
    }

    /** As above, with {@code routers} router replicas (each in process) behind Envoy. */
    static Fleet start(String model, String tokenizer, String multimodal, long seed, ScriptedOutput scripted,
        EnvoyAbStack.Routers routers) throws Exception {
      Path dir = Stack.tokenizer(tokenizer);
      ChatFront chat = ChatFront.load(model, dir, BS, multimodal == null ? null : MultimodalModels.preset(multimodal));
      try {
        return new Fleet(model, EnvoyAbStack.start(new EnvoyAbStack.Options(Stack.ROOT, WORKERS,
            Presets.byId("llama3.1-8b-h100"), model, dir, BS, GPU_BLOCKS, seed, null, true,
            "routing: {policy: kv_aware, scrape: {interval_ms: 100}}", Files.createTempDirectory("kvrouter-e2e-ab"), 0,
            multimodal, "", scripted, null), InProcessRouter.launcher(List::of), routers), chat);
      } catch (Exception | Error e) {
        chat.close();
        throw e;
      }
    }

    /** The ideals of this fleet's prompts and answers as its workers prefill and generate them. */
    EngineIdeals ideals() {
      return new EngineIdeals(chat, model, BS, (long) GPU_BLOCKS * WORKERS);
    }

    /**
     * Runs {@code specs} once per policy ({@code kv_aware} ours, {@code round_robin} the baseline; caches reset
     * between runs, no warm-up).
     *
     * @param ideals the ideal beside each result, or null for the workload's own
     * @param progress receives the runner's progress lines
     */
    AbReport run(List<String> specs, List<String> policies, PolicyPreparer preparer, EngineIdeals ideals, Path out,
        ByteArrayOutputStream progress) throws Exception {
      try (LoadGenerator gen = new LoadGenerator(LoadConfig.defaults(stack.uri(), model)
          .withMaxRunTime(Duration.ofSeconds(30)).withTimeouts(Duration.ofSeconds(30), Duration.ofSeconds(20))
          .withSampleInterval(Duration.ofMillis(100)))) {
        AbRunner.Settings settings = new AbRunner.Settings(policies, "kv_aware", "round_robin", true, BS, true,
            Duration.ofMillis(300), Duration.ofSeconds(30), out, Map.of("test", true), 0,
            ideals == null ? null : ideals::infinite);
        return new AbRunner(gen, stack.targets(), settings, preparer,
            new PrintStream(progress, true, StandardCharsets.UTF_8)).run(specs);
      }
    }

    @Override
    public void close() {
      try {
        stack.close();
      } finally {
        chat.close();
      }
    }
  }
}
