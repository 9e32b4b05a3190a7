package dev.kvrouter.examples.sim.fleet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.kvrouter.examples.sim.http.FaultControl;
import dev.kvrouter.examples.sim.http.ScriptedOutput;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.extproc.model.MultimodalSpec;
import dev.kvrouter.index.wire.WireLayout;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Launches N simulated vLLM workers in one JVM and writes the router's {@code workers.yaml}.
 *
 * <p>Every option can also come from a YAML file ({@code --config}) whose keys are the long option names
 * without dashes, e.g. {@code workers: 8} or {@code http-base-port: 8100}; the command line wins.
 */
@Command(name = "kvrouter-sim", mixinStandardHelpOptions = true, sortOptions = false,
    description = "Start simulated vLLM workers (OpenAI API, vLLM metrics, KV events over ZMQ) on loopback.")
public final class SimFleetMain implements Callable<Integer> {

  @Option(names = "--config", description = "YAML file with option defaults (keys = long option names).")
  Path config;

  @Option(names = "--workers", defaultValue = "8", description = "Number of workers (default ${DEFAULT-VALUE}).")
  int workers;

  @Option(names = "--name-prefix", defaultValue = "sim-", description = "Worker name prefix.")
  String namePrefix;

  @Option(names = "--bind", defaultValue = "127.0.0.1", description = "Listen address.")
  String bind;

  @Option(names = "--http-base-port", defaultValue = "8100", description = "HTTP port of worker 0 (0 = ephemeral).")
  int httpBasePort;

  @Option(names = "--events", defaultValue = "true", negatable = true, fallbackValue = "true",
      description = "Publish KV events over ZMQ.")
  boolean events;

  @Option(names = "--events-base-port", defaultValue = "5600", description = "ZMQ PUB port of worker 0.")
  int eventsBasePort;

  @Option(names = "--replay-base-port", defaultValue = "5700",
      description = "ZMQ ROUTER replay port of worker 0 (-1 = no replay).")
  int replayBasePort;

  @Option(names = "--topic", defaultValue = "", description = "Event topic (vLLM default: empty).")
  String topic;

  @Option(names = "--layout", defaultValue = "vllm_map",
      description = "Event layout: vllm_map (vLLM >= 0.24), vllm_array (<= 0.23), sglang_array.")
  String layout;

  @Option(names = "--preset", defaultValue = "llama3.1-8b-h100",
      description = "Model and GPU preset: llama3.1-8b-h100, llama3.1-8b-a100, qwen3-8b-h100, llama3.1-8b-a100-40g.")
  String preset;

  @Option(names = "--model", description = "Served model name (default: the preset's model id).")
  String model;

  @Option(names = "--adapters", split = ",", description = "LoRA adapter names every worker accepts.")
  List<String> adapters;

  @Option(names = "--tokenizer", description = "Directory with the model's tokenizer.json, for text prompts.")
  Path tokenizer;

  @Option(names = "--multimodal", paramLabel = "PRESET",
      description = "Serve image chat requests of a multimodal model, expanded as the router's `multimodal: "
          + "{preset: PRESET}` does (known: gemma3). Needs --tokenizer (that model's) and --model. Timing and KV "
          + "capacity stay --preset's.")
  String multimodal;

  @Option(names = "--output-tokens", defaultValue = "model",
      description = "What workers generate: model (readable text from the tokenizer's vocabulary, the default) or "
          + "workload[:LO..HI] (a request's OpenAI `seed` names its answer: token i is the load generator's "
          + "TokenSpace.token(seed, i) over ids LO..HI, default 1000..128000, rendered token_id:<id>; for "
          + "multi-turn format=tokens workloads whose later turns resend the model's own answers).")
  String outputTokens;

  @Option(names = "--block-size", defaultValue = "16", description = "KV block size in tokens.")
  int blockSize;

  @Option(names = "--num-gpu-blocks", defaultValue = "0", description = "KV blocks per worker (0 = preset).")
  int numGpuBlocks;

  @Option(names = "--kv-offloading-size", defaultValue = "0",
      description = "GiB of vLLM native CPU KV offload per worker (--kv-offloading-backend native); 0 = off.")
  double kvOffloadingSize;

  @Option(names = "--max-num-seqs", defaultValue = "0",
      description = "Requests running at once (0 = vLLM's default on the preset's GPU: 1024 on H100, 256 on A100).")
  int maxNumSeqs;

  @Option(names = "--max-num-batched-tokens", defaultValue = "0",
      description = "Token budget per step (0 = vLLM's default on the preset's GPU: 8192 on H100, 2048 on A100).")
  int maxNumBatchedTokens;

  @Option(names = "--max-model-len", defaultValue = "0", description = "Context length (0 = preset).")
  int maxModelLen;

  @Option(names = "--long-prefill-token-threshold", defaultValue = "0")
  int longPrefillTokenThreshold;

  @Option(names = "--enable-prefix-caching", defaultValue = "true", negatable = true, fallbackValue = "true")
  boolean enablePrefixCaching;

  @Option(names = "--seed", defaultValue = "0", description = "Engine seed (0 = random per process).")
  long seed;

  @Option(names = "--drop-rate", defaultValue = "0", description = "Fault: probability a KV event batch is lost.")
  double dropRate;

  @Option(names = "--delay-ms", defaultValue = "0", description = "Fault: delay of every KV event batch.")
  long delayMs;

  @Option(names = "--reorder-rate", defaultValue = "0", description = "Fault: probability a batch is reordered.")
  double reorderRate;

  @Option(names = "--stop-publishing", defaultValue = "false", description = "Fault: publish no KV events.")
  boolean stopPublishing;

  @Option(names = "--slowdown", defaultValue = "1.0", description = "Fault: multiplier on step time.")
  double slowdown;

  @Option(names = "--workers-file", defaultValue = "workers.yaml", description = "Where to write workers.yaml.")
  Path workersFile;

  @Option(names = "--writer-threads", defaultValue = "4", description = "Response writer threads (whole fleet).")
  int writerThreads;

  public static void main(String[] args) {
    if (System.getProperty("logback.configurationFile") == null) {
      System.setProperty("logback.configurationFile", "sim-logback.xml");
    }
    CommandLine cl = new CommandLine(new SimFleetMain());
    try {
      Path cfg = configArg(args);
      if (cfg != null) {
        cl.setDefaultValueProvider(yamlDefaults(cfg));
      }
    } catch (IOException | IllegalArgumentException e) {
      System.err.println("kvrouter-sim: " + e.getMessage());
      System.exit(2);
    }
    System.exit(cl.execute(args));
  }

  FleetConfig fleetConfig() {
    WireLayout wl = WireLayout.valueOf(layout.toUpperCase(Locale.ROOT));
    FaultControl.Update faults = new FaultControl.Update(dropRate, delayMs, reorderRate, stopPublishing, slowdown,
        null);
    return new FleetConfig(workers, namePrefix, bind, httpBasePort, events, eventsBasePort, replayBasePort, topic,
        wl, Presets.byId(preset), model, adapters, tokenizer, blockSize, numGpuBlocks, maxNumSeqs,
        maxNumBatchedTokens, maxModelLen, longPrefillTokenThreshold, enablePrefixCaching, seed, faults,
        writerThreads, kvOffloadingSize, multimodal == null ? null : multimodalSpec(),
        ScriptedOutput.parse(outputTokens));
  }

  private MultimodalSpec multimodalSpec() {
    if (tokenizer == null || model == null) {
      throw new IllegalArgumentException("--multimodal needs --tokenizer (the multimodal model's tokenizer "
          + "directory) and --model (its served name, as in the router's models: entry)");
    }
    return MultimodalModels.preset(multimodal);
  }

  @Override
  public Integer call() throws Exception {
    FleetConfig fc;
    try {
      fc = fleetConfig();
    } catch (IllegalArgumentException e) {
      System.err.println("kvrouter-sim: " + e.getMessage());
      return 2;
    }
    SimFleet fleet = SimFleet.start(fc);
    CountDownLatch stop = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      fleet.close();
      stop.countDown();
    }, "sim-shutdown"));
    fleet.writeWorkersFile(workersFile);
    System.out.printf("kvrouter-sim: %d workers, preset %s, %d KV blocks of %d tokens each; workers file %s%n",
        fc.workers(), fc.preset().id(), fc.engineConfig(0).numGpuBlocks(), fc.blockSize(),
        workersFile.toAbsolutePath());
    for (SimWorker w : fleet.workers()) {
      System.out.printf("  %s  http://%s:%d  events %s  replay %s%n", w.name(), fc.bind(), w.httpPort(),
          w.eventsEndpoint(), w.replayEndpoint());
    }
    if (fc.multimodal() != null) {
      System.out.printf("  media: %s (router's kvrouter.yaml: models: [{name: \"%s\", tokenizer: %s, "
          + "multimodal: {preset: %s}}])%n", fc.multimodal().preset(), fc.servedModel(),
          fc.tokenizer().toAbsolutePath(), fc.multimodal().preset());
    }
    System.out.flush();
    stop.await();
    return 0;
  }

  private static Path configArg(String[] args) {
    for (int i = 0; i < args.length; i++) {
      if (args[i].equals("--config") && i + 1 < args.length) {
        return Path.of(args[i + 1]);
      }
      if (args[i].startsWith("--config=")) {
        return Path.of(args[i].substring("--config=".length()));
      }
    }
    return null;
  }

  /** Option defaults from a flat YAML map; unknown keys are errors so a typo never goes unnoticed. */
  static CommandLine.IDefaultValueProvider yamlDefaults(Path file) throws IOException {
    JsonNode root = new ObjectMapper(new YAMLFactory()).readTree(Files.readString(file));
    Map<String, String> values = new HashMap<>();
    if (root != null && !root.isNull()) {
      if (!root.isObject()) {
        throw new IllegalArgumentException(file + ": must be a mapping of option names to values");
      }
      for (Map.Entry<String, JsonNode> e : root.properties()) {
        JsonNode v = e.getValue();
        values.put("--" + e.getKey(), v.isArray() ? joined(v) : v.asText());
      }
    }
    CommandLine probe = new CommandLine(new SimFleetMain());
    for (String k : values.keySet()) {
      if (probe.getCommandSpec().findOption(k) == null || k.equals("--config")) {
        throw new IllegalArgumentException(file + ": unknown option `" + k.substring(2) + "`");
      }
    }
    return argSpec -> argSpec instanceof CommandLine.Model.OptionSpec o
        ? values.getOrDefault(o.longestName(), o.defaultValue()) : null;
  }

  private static String joined(JsonNode array) {
    StringBuilder b = new StringBuilder();
    for (JsonNode n : array) {
      if (b.length() > 0) {
        b.append(',');
      }
      b.append(n.asText());
    }
    return b.toString();
  }
}
