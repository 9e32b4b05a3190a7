package dev.kvrouter.examples.ab;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.loadgen.RequestBodies;
import dev.kvrouter.examples.sim.http.PipelinePromptEncoder;
import dev.kvrouter.examples.sim.http.PromptEncoder;
import dev.kvrouter.examples.sim.http.ToolCallScript;
import dev.kvrouter.examples.workload.ChatAnswers;
import dev.kvrouter.examples.workload.Prompt;
import dev.kvrouter.examples.workload.PromptIds;
import dev.kvrouter.examples.workload.ToolCallAnswer;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadRequest;
import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.model.ModelResources;
import dev.kvrouter.extproc.model.ModelSpec;
import dev.kvrouter.extproc.model.MultimodalSpec;
import dev.kvrouter.extproc.model.ResourceState;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.RequestBodyParser;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.tenancy.TenantIsolation;
import dev.kvrouter.extproc.tokenize.CharsPerTokenEstimator;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * The text side of a virtual-time run for chat workloads: the router's request path up to the prompt pipeline
 * (body parser, model registry, tenancy) and the worker's prompt encoder, both over one {@code PipelineResources}
 * (the model's real tokenizer and chat template). Loaded once and shared by every run of a session.
 *
 * <p>Both A/B runners also take the workload's ideal reuse from it ({@link #engineIds}): the prompt as a worker
 * prefills it, media keyed by the engine's identifiers, so the ideal stands beside what the workers report.
 */
public final class ChatFront implements AutoCloseable {

  private static final ObjectMapper JSON = new ObjectMapper();

  private final PipelinePromptEncoder encoder;
  private final ModelRegistry models;
  private final RequestPreparer preparer;
  private final SegmentCache segments;
  /** The tokenizer's chars-per-token estimate, and its value as calibrated at load. */
  private final CharsPerTokenEstimator estimator;
  private final double calibrated;

  private ChatFront(PipelinePromptEncoder encoder, ModelRegistry models, SegmentCache segments) {
    this.encoder = encoder;
    this.segments = segments;
    this.models = models;
    this.preparer = new RequestPreparer(models, TenantIsolation.defaults(), System::nanoTime);
    this.estimator = encoder.resources().tokenizer().charsPerToken();
    this.calibrated = estimator.charsPerToken();
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
    // Unbounded, so what a run finds in it is what warm() put there (bounded, Caffeine admits by a sketch over
    // randomly seeded keys and evicts on a pool thread). It holds one workload's distinct segments: finite.
    SegmentCache segments = SegmentCache.create(Long.MAX_VALUE);
    PipelinePromptEncoder encoder = PipelinePromptEncoder.load(model, tokenizer, multimodal, segments);
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
    return new ChatFront(encoder, models, segments);
  }

  public PipelinePromptEncoder encoder() {
    return encoder;
  }

  public RequestPreparer preparer() {
    return preparer;
  }

  /**
   * The prompts of {@code w} as a worker of {@code model} prefills them, for {@link
   * dev.kvrouter.examples.workload.IdealReuse#compute}: a chat prompt is the body the load generator sends, parsed
   * by the router's request path and rendered, tokenized and media-expanded by the worker's encoder, its media keyed
   * with the engine's identifiers (the client's uuid, else the engine's own content hash); each is computed once,
   * on first use. A token prompt is the workload's own ids ({@link Workload#promptIds}).
   *
   * <p>The function is not thread-safe (its memo is a plain map): one thread per function.
   */
  public Function<WorkloadRequest, PromptIds> engineIds(Workload w, String model) {
    Map<WorkloadRequest, PromptIds> memo = new IdentityHashMap<>();
    return r -> !r.prompt().format().templated() ? w.promptIds(r)
        : memo.computeIfAbsent(r, x -> {
          PromptEncoder.ChatTokens t = encoder.prompt(parse(w, x, model));
          return new PromptIds(t.tokens(), t.media());
        });
  }

  /**
   * Each request's generated tokens as the workers generate them when its answer is scripted (null otherwise), for
   * the ideals: a chat answer is the answer text's tokens then the end-of-turn token ({@link ChatAnswers}), a coding
   * agent's the template's rendering of its text and tool call ({@link #toolCallScript}), as far as
   * {@code max_tokens} lets the model go ({@link WorkloadRequest#generated}), computed once per request on first use;
   * a token answer is the workload's script ({@link Workload#answerTokens}). {@code model} is the served model the
   * bodies name.
   *
   * <p>The function is not thread-safe (its memo is a plain map): one thread per function.
   */
  public Function<WorkloadRequest, int[]> engineAnswers(Workload w, String model) {
    if (!w.chatPrompts() || !w.scriptsAnswers()) {
      return w::answerTokens;
    }
    ChatAnswers a = encoder.chatAnswers(w.tokenSpace());
    Map<WorkloadRequest, int[]> memo = new IdentityHashMap<>();
    return r -> r.answer() == null ? null : memo.computeIfAbsent(r, x -> x.generated(
        x.prompt().format() == Prompt.Format.MESSAGES || x.reasoning() > 0
            ? toolCallScript(kind(x.prompt()), RequestBodies.body(w, x, model)).tokens() : a.tokens(x.answer())));
  }

  /**
   * The answer a Messages (or thinking chat) body of that {@code kind} scripts ({@code vllm_xargs}) as a worker
   * generates it: the template's rendering of the answer after the prompt, through its end of turn.
   */
  public ToolCallScript toolCallScript(InferenceRequest.Kind kind, byte[] body) {
    JsonNode json;
    try {
      json = JSON.readTree(body);
    } catch (IOException e) {
      throw new IllegalStateException("the workload produced a body that is not JSON", e);
    }
    return encoder.toolCallScript(kind, json, ToolCallAnswer.fromXargs(json.get("vllm_xargs")));
  }

  /**
   * Puts the request path in the same state before every run of {@code w}: the segment cache emptied, the
   * chars-per-token estimate back where calibration left it, then every chat prompt of {@code w} rendered and
   * tokenized once, in workload order, so the cache holds them all and the estimate has followed this workload's
   * text, as a router's does over its traffic. The router's request path stops tokenizing early where no worker
   * holds the next block and estimates the rest from that ratio; mid-segment the estimate also differs on a cache
   * hit (the segment's ids come whole) from a miss (tokenized piecewise). So a run's estimates, hence the load the
   * router accounts, depend only on the run: the same workload, policy and seed give the same decisions whatever
   * the session ran before. Only resent prompts the workload does not list (answers cut short) still miss, the same
   * way in every such run.
   */
  public void warm(Workload w, String model) {
    segments.invalidateAll();
    estimator.reset(calibrated);
    Function<WorkloadRequest, PromptIds> ids = engineIds(w, model);
    w.requests().forEach(ids::apply);
  }

  private InferenceRequest parse(Workload w, WorkloadRequest r, String model) {
    byte[] body = RequestBodies.body(w, r, model);
    try {
      return preparer.prepare(kind(r.prompt()), body, body.length, null).request();
    } catch (RequestBodyParser.BadRequest e) {
      throw new IllegalStateException(e.error().toString(), e);
    }
  }

  /** The router's path for a templated prompt's body: vLLM's Messages conversion, or chat. */
  static InferenceRequest.Kind kind(Prompt p) {
    return p.format() == Prompt.Format.MESSAGES ? InferenceRequest.Kind.MESSAGES : InferenceRequest.Kind.CHAT;
  }

  @Override
  public void close() {
    encoder.close();
  }
}
