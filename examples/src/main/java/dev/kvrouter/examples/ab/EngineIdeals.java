package dev.kvrouter.examples.ab;

import dev.kvrouter.examples.workload.AnswerReuse;
import dev.kvrouter.examples.workload.IdealReuse;
import dev.kvrouter.examples.workload.PromptIds;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.function.Function;
import java.util.function.ToIntFunction;

/**
 * The ideal reuse of workloads over their prompts as the workers prefill them ({@link ChatFront#engineIds}: chat
 * rendered and tokenized with the model's own template and tokenizer, media keyed by the engine's identifiers) and
 * their scripted answers as the workers generate them ({@link ChatFront#engineAnswers}), with an infinite cache and
 * with the fleet's KV capacity as one LRU cache, as the virtual-time A/B computes it. Each prompt is rendered once
 * for both, and each figure computed once per workload instance.
 *
 * <p>Not thread-safe: one thread (the A/B runner's) per instance.
 */
public final class EngineIdeals {

  private final ChatFront chat;
  private final String model;
  private final int blockSize;
  private final long fleetBlocks;
  private final Map<Workload, Function<WorkloadRequest, PromptIds>> prompts = new IdentityHashMap<>();
  private final Map<Workload, Function<WorkloadRequest, int[]>> answers = new IdentityHashMap<>();
  private final Map<Workload, IdealReuse> infinite = new IdentityHashMap<>();
  private final Map<Workload, IdealReuse> fleet = new IdentityHashMap<>();

  /**
   * @param chat the model's request path and encoder
   * @param model the served model name (the requests' {@code model})
   * @param blockSize the workers' KV block size
   * @param fleetBlocks KV blocks of the whole fleet
   */
  public EngineIdeals(ChatFront chat, String model, int blockSize, long fleetBlocks) {
    this.chat = chat;
    this.model = model;
    this.blockSize = blockSize;
    this.fleetBlocks = fleetBlocks;
  }

  /** With an infinite cache: the ideal. */
  public IdealReuse infinite(Workload w) {
    return infinite.computeIfAbsent(w, x -> compute(x, Long.MAX_VALUE));
  }

  /** With the fleet's KV capacity as one LRU cache. */
  public IdealReuse fleetCache(Workload w) {
    return fleet.computeIfAbsent(w, x -> compute(x, fleetBlocks));
  }

  public long fleetBlocks() {
    return fleetBlocks;
  }

  /** The prompts of {@code w} as the workers prefill them, each computed once. */
  public Function<WorkloadRequest, PromptIds> prompts(Workload w) {
    return prompts.computeIfAbsent(w, x -> chat.engineIds(x, model));
  }

  /**
   * Each request's generated tokens when its answer is scripted, as the workers generate and cache them
   * ({@link ChatFront#engineAnswers}: a chat answer's text tokens and end-of-turn token), each computed once.
   */
  public Function<WorkloadRequest, int[]> answers(Workload w) {
    return answers.computeIfAbsent(w, x -> chat.engineAnswers(x, model));
  }

  /**
   * What the next turns of {@code w} kept of the previous answers' blocks and were served of them, or null when
   * {@code w} scripts no answers.
   *
   * @param cachedTokens each request's {@code cached_tokens} as served, negative when it failed
   */
  public AnswerReuse answerReuse(Workload w, ToIntFunction<WorkloadRequest> cachedTokens) {
    return w.scriptsAnswers()
        ? AnswerReuse.compute(w.requests(), prompts(w), answers(w), blockSize, cachedTokens) : null;
  }

  private IdealReuse compute(Workload w, long capacityBlocks) {
    return IdealReuse.compute(w.requests(), prompts(w), answers(w), blockSize, capacityBlocks);
  }
}
