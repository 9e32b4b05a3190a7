package dev.kvrouter.examples.ab;

import dev.kvrouter.examples.sim.http.PipelinePromptEncoder;
import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.model.ModelResources;
import dev.kvrouter.extproc.model.ModelSpec;
import dev.kvrouter.extproc.model.MultimodalSpec;
import dev.kvrouter.extproc.model.ResourceState;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.tenancy.TenantIsolation;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * The text side of a virtual-time run for chat workloads: the router's request path up to the prompt pipeline
 * (body parser, model registry, tenancy) and the worker's prompt encoder, both over one {@code PipelineResources}
 * (the model's real tokenizer and chat template). Loaded once and shared by every run of a session.
 */
public final class ChatFront implements AutoCloseable {

  private final PipelinePromptEncoder encoder;
  private final ModelRegistry models;
  private final RequestPreparer preparer;

  private ChatFront(PipelinePromptEncoder encoder, ModelRegistry models) {
    this.encoder = encoder;
    this.models = models;
    this.preparer = new RequestPreparer(models, TenantIsolation.defaults(), System::nanoTime);
  }

  /**
   * Loads {@code tokenizer} for {@code model} with {@code blockSize}. For a multimodal model the router's model
   * entry carries {@code multimodal} (as kvrouter.yaml's {@code multimodal: {preset: gemma3}}) and the worker
   * expands media with the same spec, so both place every image at the same tokens.
   *
   * @param multimodal the model's media expansion, or null for a text model (media then fall back to load, and the
   *     worker refuses them)
   * @throws IOException if the tokenizer cannot be loaded
   */
  public static ChatFront load(String model, Path tokenizer, int blockSize, MultimodalSpec multimodal)
      throws IOException {
    PipelinePromptEncoder encoder = PipelinePromptEncoder.load(model, tokenizer, multimodal);
    ModelSpec spec = new ModelSpec(model, tokenizer.toAbsolutePath().toString(), null, null, blockSize, null, null,
        true, multimodal);
    // The registry hands out the encoder's own resources: the worker and the router tokenize with one instance.
    ModelResources shared = encoder.resources();
    ModelRegistry models = ModelRegistry.create(List.of(spec), tokenizer.toAbsolutePath().getParent(),
        (s, f) -> shared, Runnable::run, System::nanoTime, new SimpleMeterRegistry());
    try {
      ResourceState s = models.await(model, Duration.ofSeconds(60));
      if (!(s instanceof ResourceState.Ready)) {
        throw new IOException("model " + model + " did not load: " + s);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while loading " + model, e);
    }
    return new ChatFront(encoder, models);
  }

  public PipelinePromptEncoder encoder() {
    return encoder;
  }

  public RequestPreparer preparer() {
    return preparer;
  }

  @Override
  public void close() {
    encoder.close();
  }
}
