package dev.kvrouter.extproc.pipeline;

import dev.kvrouter.extproc.request.ChatPrompt;
import dev.kvrouter.extproc.request.CompletionPrompt;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.MultimodalBlockKeys;
import dev.kvrouter.extproc.request.PreparedRequest;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.extproc.routing.PromptInfo;
import dev.kvrouter.extproc.routing.RequestTimings;
import dev.kvrouter.extproc.template.ChatRequestFields;
import dev.kvrouter.extproc.template.TemplateException;
import dev.kvrouter.extproc.template.VllmChatRenderer;
import dev.kvrouter.extproc.tokenize.TokenCursor;
import dev.kvrouter.extproc.tokenize.Tokenizer;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.block.BlockHasher;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * From a prepared request to the block hashes the router scores: render the chat template, tokenize, cut full
 * blocks and hash them with {@link BlockHasher} in the request's namespace, exactly as the engine will see
 * the prompt.
 *
 * <p>Early stop: blocks are hashed as the tokenizer produces them and fed to the index's {@link
 * PrefixOverlapSource.Matcher}; once no worker holds the prefix so far, no later block can be held either, so
 * the rest of the prompt cannot change the decision. Tokenizing stops there and the prompt's length is
 * estimated (exact count of what was tokenized plus the tokenizer's calibrated characters per token for the
 * rest). The full chain is still needed for the router's predicted entries, so {@link Outcome#complete}
 * finishes it on the background executor after the decision and records it for the chosen worker.
 *
 * <p>Media requests are reproduced for models with a configured fixed-size expansion ({@link MediaExpander}).
 * Anything that cannot be reproduced (unknown or loading model, template error, tokenizer failure, media for a
 * model whose expansion the router cannot know) yields no prompt and a reason: the
 * request is routed by load, visibly, and never fails because of it.
 */
public final class PromptPipeline {

  private static final Logger log = LoggerFactory.getLogger(PromptPipeline.class);
  /** Tokens asked of the tokenizer per step: a few blocks, so early stop wastes little work. */
  private static final int STEP_BLOCKS = 4;
  /**
   * What early-stopped prompts waiting for the background executor may hold at once (their text, 2 bytes a char,
   * and their token ids): each holds its whole prompt after the body's bytes went back to the body budget, and the
   * executor's queue bounds tasks, not bytes. Past it a completion is dropped as one the full queue refuses.
   */
  static final long MAX_QUEUED_BYTES = 64L << 20;

  private final PrefixOverlapSource overlaps;
  private final Executor background;
  private final LongSupplier nanoTime;
  private final boolean earlyStop;
  private final MeterRegistry meters;
  private final Map<String, Counter> fallbacks = new ConcurrentHashMap<>();
  private final Counter earlyStops;
  private final Counter completionsDropped;
  private final AtomicLong queuedBytes = new AtomicLong();

  /**
   * @param background runs the rest of an early-stopped prompt after the decision (bounded; work it rejects
   *     is counted and dropped: predictions are an optimisation)
   * @param earlyStop false to always tokenize whole prompts (benchmarks, and the simulator's exactness)
   */
  public PromptPipeline(PrefixOverlapSource overlaps, Executor background, LongSupplier nanoTime, boolean earlyStop,
      MeterRegistry meters) {
    this.overlaps = overlaps;
    this.background = background;
    this.nanoTime = nanoTime;
    this.earlyStop = earlyStop;
    this.meters = meters;
    this.earlyStops = Counter.builder("kvrouter_prompt_early_stops_total")
        .description("prompts whose tokenization stopped at the first block no worker holds").register(meters);
    this.completionsDropped = Counter.builder("kvrouter_prompt_completions_dropped_total")
        .description("early-stopped prompts whose chain was not finished because the background queue was full")
        .register(meters);
    Gauge.builder("kvrouter_prompt_completions_queued_bytes", queuedBytes, AtomicLong::get)
        .description("what early-stopped prompts waiting for the rest of their chain hold (at most 64 MiB)")
        .baseUnit("bytes").register(meters);
  }

  /** The pipeline's answer for one request. */
  public record Outcome(PromptInfo prompt, String unavailable, RequestTimings timings, Completion completion) {

    /**
     * Runs what waits for the decision on {@code chosen}: the rest of an early-stopped prompt's chain, or the
     * media identifier a media prompt's worker will teach; a no-op otherwise. Never blocks.
     */
    public void complete(WorkerId chosen) {
      if (completion != null && chosen != null) {
        completion.run(chosen);
      }
    }
  }

  @FunctionalInterface
  interface Completion {
    void run(WorkerId chosen);
  }

  public Outcome run(PreparedRequest prepared) {
    long parse = prepared.parseNanos();
    String unavailable = prepared.scope().fallback() != null ? prepared.scope().fallback()
        : prepared.request().unreproducible();
    int blockSize = prepared.scope().model().blockSize();
    long root = prepared.scope().namespace().rootSeed();
    InferenceRequest request = prepared.request();
    // A batch is served by one worker; its first prompt leads. Token ids need no tokenizer: only the block size
    // and the namespace, which a known model has even while its tokenizer is loading.
    if (request.prompt() instanceof CompletionPrompt c && !c.inputs().isEmpty()
        && c.first() instanceof CompletionPrompt.Tokens t && prepared.scope().model().known()) {
      int[] ids = PromptTruncation.tokens(t.ids().toArray(), c.truncatePromptTokens(), c.truncationSide());
      return hashWhole(ids, root, blockSize, parse, 0, 0);
    }
    if (unavailable != null) {
      return unavailable(unavailable, parse, 0, 0);
    }
    PipelineResources res = prepared.scope().model().resources(PipelineResources.class).orElse(null);
    if (res == null) {
      return unavailable("no_tokenizer", parse, 0, 0);
    }
    long t0 = nanoTime.getAsLong();
    RequestBuffers buffers = RequestBuffers.take();
    try {
      if (request.prompt() instanceof CompletionPrompt c) {
        if (!(c.first() instanceof CompletionPrompt.Text first)) {
          return unavailable("no_tokenizer", parse, 0, 0);
        }
        String text = first.text();
        if (c.truncatePromptTokens() != null) {
          return hashTruncated(res.tokenizer(), text, c.addSpecialTokens(), c.truncatePromptTokens(),
              c.truncationSide(), root, blockSize, parse, 0);
        }
        TokenCursor cursor = res.tokenizer().cursor(text, c.addSpecialTokens(), buffers.tokens);
        return hash(cursor, text.length(), root, blockSize, parse, 0, buffers);
      }
      ChatPrompt chat = (ChatPrompt) request.prompt();
      String media = request.multimodal().isEmpty() ? null : mediaUnavailable(res.media(), request, chat);
      if (media != null) {
        return unavailable(media, parse, 0, 0);
      }
      VllmChatRenderer renderer = res.chat(chat.tools() != null && !chat.tools().isEmpty());
      if (renderer == null || chat.chatTemplate() != null) {
        // No template, or a template in the request (vLLM serves it only with --trust-request-chat-template)
        return unavailable(renderer == null ? "no_chat_template" : "request_chat_template", parse, 0, 0);
      }
      String text = renderer.render(new ChatRequestFields(chat.messages(), chat.tools(), chat.toolChoice(),
          chat.addGenerationPrompt(), chat.continueFinalMessage(), chat.documents(), chat.chatTemplateKwargs(),
          chat.reasoningEffort()));
      long template = nanoTime.getAsLong() - t0;
      if (!request.multimodal().isEmpty()) {
        return hashMultimodal(res, text, chat.addSpecialTokens(), request, root, blockSize, parse, template);
      }
      if (chat.truncatePromptTokens() != null) {
        return hashTruncated(res.tokenizer(), text, chat.addSpecialTokens(), chat.truncatePromptTokens(),
            chat.truncationSide(), root, blockSize, parse, template);
      }
      TokenCursor cursor = res.tokenizer().cursor(text, chat.addSpecialTokens(), buffers.tokens);
      return hash(cursor, text.length(), root, blockSize, parse, template, buffers);
    } catch (TemplateException e) {
      return unavailable("template_error", parse, nanoTime.getAsLong() - t0, 0);
    } catch (RuntimeException e) {
      // The tokenizer or a template edge nobody anticipated: route by load, keep serving, say why.
      log.warn("request path failed for model {}: {}", request.model(), withoutMessage(e));
      return unavailable("tokenizer_error", parse, nanoTime.getAsLong() - t0, 0);
    } finally {
      buffers.giveBack();
    }
  }

  /**
   * Why a media request cannot be reproduced, or null when it can: the model needs a fixed-size expansion for
   * every modality in the request (most vision models size an image's tokens by its pixels, which the router never
   * fetches), and neither processor arguments (they change the expansion, e.g. Gemma 3's pan-and-scan) nor prompt
   * truncation may apply.
   */
  private static String mediaUnavailable(MediaExpander media, InferenceRequest request, ChatPrompt chat) {
    if (media == null || !media.covers(request.multimodal())) {
      return "multimodal";
    }
    if (!chat.mmProcessorKwargs().isEmpty()) {
      return "multimodal_processor_kwargs";
    }
    return chat.truncatePromptTokens() != null ? "multimodal_truncation" : null;
  }

  /**
   * A media request: the whole prompt is tokenized (no early stop: the expansion needs every placeholder), each
   * item's placeholder expanded as vLLM's processor does, and every block hashed with the multimodal keys of the
   * items it overlaps, so an image's blocks match only the same image at the same offset. Items without a uuid
   * take the engine identifier learned from events when there is one ({@link LearnedMediaIds}); otherwise the
   * outcome's completion tells the index which worker will store the first of them, to learn it.
   */
  private Outcome hashMultimodal(PipelineResources res, String text, boolean addSpecialTokens,
      InferenceRequest request, long root, int blockSize, long parse, long template) {
    long tt = nanoTime.getAsLong();
    MediaExpander.Expanded expanded;
    try {
      expanded = res.media().expand(res.tokenizer().encode(text, addSpecialTokens), request.multimodal());
    } catch (MediaExpander.Mismatch e) {
      return unavailable("multimodal_mismatch", parse, template, nanoTime.getAsLong() - tt);
    }
    long tokenize = nanoTime.getAsLong() - tt;
    long th = nanoTime.getAsLong();
    int[] ids = expanded.tokens();
    LearnedMediaIds media = LearnedMediaIds.resolve(expanded.placements(), root, overlaps);
    long[] extras = MultimodalBlockKeys.extras(media.placements(), ids.length, blockSize);
    long[] hashes = BlockHasher.hashBlocksWithExtras(root, ids, blockSize, extras);
    Completion learn = media.firstUnresolved() == null ? null
        : chosen -> media.expect(overlaps, chosen, root, hashes, blockSize);
    return new Outcome(new PromptInfo(ids.length, blockSize, hashes), null,
        new RequestTimings(parse, template, tokenize, nanoTime.getAsLong() - th), learn);
  }

  /**
   * A prompt with {@code truncate_prompt_tokens}: tokenized whole and truncated as vLLM does ({@link
   * PromptTruncation}); the kept tokens depend on the whole prompt, so there is nothing to stop early.
   */
  private Outcome hashTruncated(Tokenizer tokenizer, String text, boolean addSpecialTokens, int keep, String side,
      long root, int blockSize, long parse, long template) {
    long tt = nanoTime.getAsLong();
    int[] ids = PromptTruncation.text(tokenizer, text, addSpecialTokens, keep, side);
    long tokenize = nanoTime.getAsLong() - tt;
    if (ids == null) {
      return unavailable("truncation_unsupported", parse, template, tokenize);
    }
    return hashWhole(ids, root, blockSize, parse, template, tokenize);
  }

  /** Every full block of ids already final (token-id prompts, truncated prompts): no early stop, nothing to learn. */
  private Outcome hashWhole(int[] ids, long root, int blockSize, long parse, long template, long tokenize) {
    long th = nanoTime.getAsLong();
    long[] hashes = BlockHasher.hashFullBlocks(root, ids, ids.length, blockSize);
    return new Outcome(new PromptInfo(ids.length, blockSize, hashes), null,
        new RequestTimings(parse, template, tokenize, nanoTime.getAsLong() - th), null);
  }

  /**
   * Tokenizes and hashes block by block until the prompt ends or no worker can hold the next block. The cursor
   * writes into {@code buffers.tokens}; this takes the (possibly grown) arrays back into {@code buffers}, except
   * the token array of an early-stopped cursor, which goes with the cursor to the background executor.
   */
  private Outcome hash(TokenCursor cursor, int textChars, long root, int blockSize, long parse, long template,
      RequestBuffers buffers) {
    PrefixOverlapSource.Matcher matcher = earlyStop ? overlaps.matcher() : null;
    long[] hashes = buffers.hashes;
    int n = 0;
    long parent = root;
    long tokenizeNanos = 0;
    long hashNanos = 0;
    boolean stopped = false;
    while (true) {
      int need = (n + 1) * blockSize;
      if (cursor.tokenCount() < need) {
        if (cursor.isComplete()) {
          break;
        }
        long tt = nanoTime.getAsLong();
        cursor.advance(Math.max(need - cursor.tokenCount(), STEP_BLOCKS * blockSize));
        tokenizeNanos += nanoTime.getAsLong() - tt;
        if (cursor.tokenCount() < need) {
          break; // the prompt ended inside this block: only full blocks are hashed
        }
      }
      long th = nanoTime.getAsLong();
      parent = BlockHasher.blockHash(parent, cursor.tokens(), n * blockSize, blockSize, 0L);
      if (n == hashes.length) {
        hashes = Arrays.copyOf(hashes, n * 2);
      }
      hashes[n++] = parent;
      boolean held = matcher == null || matcher.advance(parent);
      hashNanos += nanoTime.getAsLong() - th;
      if (!held && !cursor.isComplete()) {
        stopped = true;
        break;
      }
    }
    long[] chain = Arrays.copyOf(hashes, n);
    buffers.hashes = hashes;
    RequestTimings timings = new RequestTimings(parse, template, tokenizeNanos, hashNanos);
    if (!stopped) {
      buffers.tokens = cursor.tokens();
      return new Outcome(new PromptInfo(cursor.tokenCount(), blockSize, chain), null, timings, null);
    }
    earlyStops.increment();
    buffers.tokens = null; // the cursor keeps writing into it off the request path
    long estimate = Math.max(cursor.estimatedTotalTokens(), (long) n * blockSize);
    int tokens = (int) Math.min(Integer.MAX_VALUE, estimate);
    final int hashed = n;
    final long last = parent;
    long held = 2L * textChars + 4L * tokens;
    Completion rest = chosen -> {
      if (queuedBytes.addAndGet(held) > MAX_QUEUED_BYTES) {
        queuedBytes.addAndGet(-held);
        completionsDropped.increment();
        return;
      }
      try {
        background.execute(() -> {
          try {
            finishChain(cursor, chain, hashed, last, blockSize, chosen);
          } finally {
            queuedBytes.addAndGet(-held);
          }
        });
      } catch (RejectedExecutionException full) {
        queuedBytes.addAndGet(-held);
        completionsDropped.increment();
      }
    };
    return new Outcome(new PromptInfo(tokens, blockSize, chain), null, timings, rest);
  }

  /** Off the request path: the rest of an early-stopped prompt, recorded as predicted for the chosen worker. */
  private void finishChain(TokenCursor cursor, long[] head, int hashed, long parent, int blockSize,
      WorkerId chosen) {
    try {
      int[] ids = cursor.finish();
      int blocks = ids.length / blockSize;
      long[] full = Arrays.copyOf(head, blocks);
      for (int b = hashed; b < blocks; b++) {
        parent = BlockHasher.blockHash(parent, ids, b * blockSize, blockSize, 0L);
        full[b] = parent;
      }
      overlaps.recordPrediction(chosen, full);
    } catch (RuntimeException e) {
      log.warn("finishing a prompt's block chain failed: {}", withoutMessage(e));
    }
  }

  private Outcome unavailable(String reason, long parse, long template, long tokenize) {
    fallbacks.computeIfAbsent(reason, r -> Counter.builder("kvrouter_prompt_unavailable_total")
        .description("requests routed without their block hashes, by reason").tag("reason", r).register(meters))
        .increment();
    return new Outcome(null, reason, new RequestTimings(parse, template, tokenize, 0), null);
  }

  /**
   * An exception as logs may show it: its class and where it was thrown, never its message, which can quote the
   * input (a tokenizer's or a parser's "for input ..."), and logs never carry prompt text.
   */
  static String withoutMessage(Throwable e) {
    StackTraceElement[] at = e.getStackTrace();
    return e.getClass().getName() + (at.length == 0 ? "" : " at " + at[0]);
  }
}
