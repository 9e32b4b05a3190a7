package dev.kvrouter.extproc.pipeline;

import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.model.ModelSpec;
import dev.kvrouter.extproc.model.MultimodalSpec;
import dev.kvrouter.extproc.model.ResourceState;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.tenancy.TenantIsolation;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;

/** A model registry over the real tokenizers in .cache/tokenizers, loaded with the pipeline's own loader. */
final class PipelineFixtures {

  static final Path TOKENIZERS = Path.of(System.getProperty("kvrouter.root", "..")).resolve(".cache/tokenizers");
  static final List<String> MODELS = List.of("qwen3", "llama3_1", "deepseek_v3", "gemma3");

  private PipelineFixtures() {}

  static Path dir(String model) {
    Path d = TOKENIZERS.resolve(model);
    if (!Files.exists(d.resolve("tokenizer.json"))) {
      throw new IllegalStateException(d + "/tokenizer.json is missing: run `bash scripts/fetch-tokenizers.sh`");
    }
    return d;
  }

  /** Gemma 3's tokenizer again, with its image expansion configured (the plain {@code gemma3} has none). */
  static final String GEMMA3_VISION = "gemma3-vision";

  /**
   * A registry serving every fetched tokenizer under its package name, with the given block size, plus
   * {@link #GEMMA3_VISION}.
   */
  static ModelRegistry registry(int blockSize) throws InterruptedException {
    List<ModelSpec> specs = new ArrayList<>();
    for (String m : MODELS) {
      Path d = dir(m);
      specs.add(new ModelSpec(m, d.resolve("tokenizer.json").toString(),
          d.resolve("tokenizer_config.json").toString(), null, blockSize, List.of("lora-" + m), null, true));
    }
    Path g = dir("gemma3");
    specs.add(new ModelSpec(GEMMA3_VISION, g.resolve("tokenizer.json").toString(),
        g.resolve("tokenizer_config.json").toString(), null, blockSize, List.of(), null, true,
        new MultimodalSpec("gemma3", null, null, null, null)));
    ModelRegistry r = ModelRegistry.create(specs, TOKENIZERS, PipelineResources.loader(
        SegmentCache.create(SegmentCache.DEFAULT_MAX_TOKENS), Clock.systemUTC()), Executors.newFixedThreadPool(2),
        System::nanoTime, new SimpleMeterRegistry());
    r.preload();
    for (String m : allModels()) {
      ResourceState s = r.await(m, Duration.ofSeconds(60));
      if (!(s instanceof ResourceState.Ready)) {
        throw new IllegalStateException("model " + m + " did not load: " + s);
      }
    }
    return r;
  }

  static List<String> allModels() {
    List<String> all = new ArrayList<>(MODELS);
    all.add(GEMMA3_VISION);
    return all;
  }

  static RequestPreparer preparer(ModelRegistry registry) {
    return new RequestPreparer(registry, TenantIsolation.defaults(), System::nanoTime);
  }
}
