package dev.kvrouter.extproc.pipeline;

import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.model.ModelSpec;
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

  /** A registry serving every fetched tokenizer under its package name, with the given block size. */
  static ModelRegistry registry(int blockSize) throws InterruptedException {
    List<ModelSpec> specs = new ArrayList<>();
    for (String m : MODELS) {
      Path d = dir(m);
      specs.add(new ModelSpec(m, d.resolve("tokenizer.json").toString(),
          d.resolve("tokenizer_config.json").toString(), null, blockSize, List.of("lora-" + m), null, true));
    }
    ModelRegistry r = ModelRegistry.create(specs, TOKENIZERS, PipelineResources.loader(
        SegmentCache.create(SegmentCache.DEFAULT_MAX_TOKENS), Clock.systemUTC()), Executors.newFixedThreadPool(2),
        System::nanoTime, new SimpleMeterRegistry());
    r.preload();
    for (String m : MODELS) {
      ResourceState s = r.await(m, Duration.ofSeconds(60));
      if (!(s instanceof ResourceState.Ready)) {
        throw new IllegalStateException("model " + m + " did not load: " + s);
      }
    }
    return r;
  }

  static RequestPreparer preparer(ModelRegistry registry) {
    return new RequestPreparer(registry, TenantIsolation.defaults(), System::nanoTime);
  }
}
