package dev.kvrouter.examples.workload;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.function.ToIntFunction;

/**
 * What the next turn of a conversation keeps of the previous answer's KV: for every turn that resends a scripted
 * answer ({@link WorkloadRequest#after} with an {@link WorkloadRequest#answer}), the blocks decode filled on the
 * engine that generated it (the full blocks of prompt + output minus the last token that lie past the prompt's
 * last full block, the block the answer completes included), how many of them the next prompt repeats token for
 * token (chained block identity: a block is kept only if everything before it is too), and, given what an engine
 * actually served, how many were hit.
 *
 * <p>For token prompts the answer round-trips and every answer block is kept. For chat prompts the next prompt is
 * the history re-rendered by the chat template and re-tokenized, so the kept share is the template's doing: the
 * {@code divergence} figures say where the engine's sequence and the next prompt first differ, relative to the
 * answer's first token (negative: inside the previous generation prompt, e.g. Qwen3's empty think block, which the
 * history rendering drops).
 *
 * @param blockSize KV block size in tokens
 * @param turns later turns counted (their previous turn scripted its answer)
 * @param answerBlocks decode-filled blocks of the previous answers
 * @param keptBlocks of those, blocks the next prompt repeats (what an ideal cache would serve of them)
 * @param servedBlocks of those, blocks the next turn was served from cache, or -1 when no served figures were given
 * @param divergenceMin smallest first-diverging position relative to the answer's start, over turns that diverge
 * @param divergenceMedian median of it
 * @param divergenceMax largest of it
 * @param noDivergence turns whose next prompt repeats the engine's whole computed sequence (prompt + answer minus
 *     the last token)
 */
public record AnswerReuse(int blockSize, long turns, long answerBlocks, long keptBlocks, long servedBlocks,
    int divergenceMin, int divergenceMedian, int divergenceMax, long noDivergence) {

  /** Share of answer blocks the next prompt repeats. */
  public double keptShare() {
    return answerBlocks == 0 ? 0 : keptBlocks / (double) answerBlocks;
  }

  /** Share of answer blocks served from cache on the next turn (-1 without served figures). */
  public double servedShare() {
    return servedBlocks < 0 ? -1 : answerBlocks == 0 ? 0 : servedBlocks / (double) answerBlocks;
  }

  /**
   * @param requests the requests in workload order
   * @param prompts each request's prompt as the engine prefills it (the ideal's {@code PromptIds})
   * @param outputs each request's generated tokens as the engine generated them (null: not scripted)
   * @param cachedTokens each request's {@code cached_tokens} as served, negative when it failed; null for the kept
   *     figures alone
   */
  public static AnswerReuse compute(List<WorkloadRequest> requests, Function<WorkloadRequest, PromptIds> prompts,
      Function<WorkloadRequest, int[]> outputs, int blockSize, ToIntFunction<WorkloadRequest> cachedTokens) {
    if (blockSize <= 0) {
      throw new IllegalArgumentException("blockSize must be positive, was " + blockSize);
    }
    Map<String, WorkloadRequest> byId = new HashMap<>();
    for (WorkloadRequest r : requests) {
      byId.put(r.id(), r);
    }
    long turns = 0;
    long answer = 0;
    long kept = 0;
    long served = cachedTokens == null ? -1 : 0;
    long none = 0;
    int[] divergence = new int[requests.size()];
    int diverged = 0;
    for (WorkloadRequest next : requests) {
      WorkloadRequest prev = next.after() == null ? null : byId.get(next.after());
      int[] out = prev == null ? null : outputs.apply(prev);
      if (out == null || out.length < 2) {
        continue;
      }
      int[] p = prompts.apply(prev).tokens();
      int[] q = prompts.apply(next).tokens();
      // the engine's computed sequence: prompt + output minus the last sampled token
      int computed = p.length + out.length - 1;
      int first = Math.floorDiv(p.length, blockSize);
      int all = computed / blockSize;
      int same = commonPrefix(p, out, q, computed);
      if (same == computed) {
        none++;
      } else {
        divergence[diverged++] = same - p.length;
      }
      turns++;
      int blocks = Math.max(0, all - first);
      int keep = Math.max(0, Math.min(all, same / blockSize) - first);
      answer += blocks;
      kept += keep;
      if (cachedTokens != null) {
        int cached = cachedTokens.applyAsInt(next);
        if (cached > 0) {
          served += Math.max(0, Math.min(first + keep, cached / blockSize) - first);
        }
      }
    }
    int[] d = Arrays.copyOf(divergence, diverged);
    Arrays.sort(d);
    return new AnswerReuse(blockSize, turns, answer, kept, served, diverged == 0 ? 0 : d[0],
        diverged == 0 ? 0 : d[diverged / 2], diverged == 0 ? 0 : d[diverged - 1], none);
  }

  /** Length of the common prefix of {@code q} and the first {@code n} tokens of {@code p + out}. */
  private static int commonPrefix(int[] p, int[] out, int[] q, int n) {
    int lim = Math.min(n, q.length);
    for (int i = 0; i < lim; i++) {
      int e = i < p.length ? p[i] : out[i - p.length];
      if (e != q[i]) {
        return i;
      }
    }
    return lim;
  }
}
