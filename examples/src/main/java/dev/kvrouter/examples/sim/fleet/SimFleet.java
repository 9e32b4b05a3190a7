package dev.kvrouter.examples.sim.fleet;

import dev.kvrouter.examples.sim.http.PipelinePromptEncoder;
import dev.kvrouter.examples.sim.http.PromptEncoder;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import dev.kvrouter.xds.registry.Worker;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Starts and stops a {@link FleetConfig}'s workers in this JVM. Each worker has its own engine thread, HTTP
 * handler pool and event publisher; the fleet shares one tokenizer and one response-writer pool.
 */
public final class SimFleet implements AutoCloseable {

  private final FleetConfig config;
  private final List<SimWorker> workers = new ArrayList<>();
  private final ExecutorService writer;
  private final PromptEncoder encoder;

  private SimFleet(FleetConfig config, PromptEncoder encoder) {
    this.config = config;
    this.encoder = encoder;
    AtomicInteger n = new AtomicInteger();
    this.writer = Executors.newFixedThreadPool(config.writerThreads(), r -> {
      Thread t = new Thread(r, "sim-writer-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    });
  }

  /** Starts every worker; on failure stops the ones already started and rethrows. */
  public static SimFleet start(FleetConfig config) throws IOException {
    int vocab = config.engineConfig(0).vocabSize();
    if (config.scriptedOutput() != null && vocab > 0 && config.scriptedOutput().space().maxIdExclusive() > vocab) {
      throw new IllegalArgumentException("output tokens " + config.scriptedOutput() + " go beyond the model's "
          + "vocabulary of " + vocab);
    }
    // The router's own tokenizer and chat renderer: workers tokenize exactly as the router hashes.
    // With a multimodal spec, media are expanded by the router's own MediaExpander from the same spec.
    PromptEncoder encoder = config.tokenizer() == null ? PromptEncoder.tokenIdsOnly()
        : PipelinePromptEncoder.load(config.servedModel(), config.tokenizer(), config.multimodal(),
            SegmentCache.create(SegmentCache.DEFAULT_MAX_TOKENS));
    SimFleet fleet = new SimFleet(config, encoder);
    try {
      for (int i = 0; i < config.workers(); i++) {
        SimWorker.Events events = config.events()
            ? new SimWorker.Events(FleetConfig.port(config.eventsBasePort(), i),
                config.replayBasePort() < 0 ? -1 : FleetConfig.port(config.replayBasePort(), i), config.topic(),
                config.layout())
            : null;
        SimWorker.Spec spec = new SimWorker.Spec(config.workerName(i), config.engineConfig(i),
            config.preset().timingModel(), config.preset().gpuMemoryUtilization(), config.bind(),
            FleetConfig.port(config.httpBasePort(), i), events, config.faults(), config.scriptedOutput());
        fleet.workers.add(SimWorker.start(spec, encoder, fleet.writer));
      }
    } catch (IOException | RuntimeException e) {
      fleet.close();
      throw e;
    }
    return fleet;
  }

  public List<SimWorker> workers() {
    return List.copyOf(workers);
  }

  public FleetConfig config() {
    return config;
  }

  /** The fleet as registry entries, labelled with the preset (and the multimodal preset, if any). */
  public List<Worker> registryEntries() {
    Map<String, String> labels = new LinkedHashMap<>();
    labels.put("preset", config.preset().id());
    if (config.multimodal() != null) {
      labels.put("multimodal", config.multimodal().preset() != null ? config.multimodal().preset() : "custom");
    }
    List<Worker> out = new ArrayList<>();
    for (SimWorker w : workers) {
      out.add(w.registryEntry(labels));
    }
    return out;
  }

  /** Writes {@code workers.yaml} for the router. */
  public void writeWorkersFile(Path file) throws IOException {
    WorkersYaml.write(registryEntries(), file);
  }

  @Override
  public void close() {
    for (SimWorker w : workers) {
      w.close();
    }
    writer.shutdownNow();
    try {
      writer.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (encoder instanceof AutoCloseable c) {
      try {
        c.close();
      } catch (Exception ignored) {
        // closing a tokenizer cannot fail in a way worth reporting at shutdown
      }
    }
  }
}
