package dev.kvrouter.examples.sim.http;

import dev.kvrouter.examples.sim.engine.OutputTokens;
import dev.kvrouter.examples.workload.ChatAnswers;
import dev.kvrouter.examples.workload.Segment;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A worker's scripted chat answers ({@code multi-turn:format=chat,answers=model} through HTTP): a chat (or Responses)
 * request whose {@code seed} names a scripted answer gets the answer {@code Segment(seed, words)} as the model emits
 * it ({@link ChatAnswers#tokens}: the answer text's tokens, then the template's end-of-turn token, where the model
 * ends its turn), exactly what the virtual-time A/B's engines generate for that request, and the client receives its
 * text ({@link #deltas}, one piece per generated token). {@code words} is {@code vllm_xargs.answer_words} when the
 * request gives it, else its {@code max_tokens} (what the load generator sends).
 *
 * <p>{@code max_tokens} caps the answer as vLLM's stop check does ({@link Generation#budget}): the model's end of
 * turn stops it ({@code stop}) only when it comes within {@code max_tokens} and the request does not set
 * {@code ignore_eos}; otherwise it runs to {@code max_tokens} ({@code length}). An answer named by
 * {@code max_tokens} alone is therefore cut before its end-of-turn token, as vLLM cuts a model that would say more.
 *
 * <p>The engine's output model is a pure function of a request's output seed, and the script's length is not a
 * function of the answer seed alone, so each generation in flight gets an output seed of its own, which
 * {@link #over} maps to its script until {@link #finished}. Those keys count up from {@link Long#MIN_VALUE}; a
 * request whose own seed is one of them (not one a workload derives, in practice) would read that script.
 *
 * <p>Thread-safe: handler threads start and finish generations, the engine thread reads the scripts.
 */
public final class ScriptedChatAnswers {

  /**
   * One scripted answer being generated.
   *
   * @param outputSeed the engine request's output seed, naming the script to {@link #over}
   * @param tokens what the model generates (text tokens, then end of turn); the request's token budget
   * @param answer the scripted chat answer, or null for a tool-call answer ({@link #startToolCall})
   */
  public record Generation(long outputSeed, int[] tokens, Segment answer) {

    /**
     * Tokens the engine generates under {@code maxTokens}: the script when its end of turn comes within them and
     * may stop the model, else {@code maxTokens} (vLLM checks the end of turn before the length, so a script of
     * exactly {@code maxTokens} tokens stops; with {@code ignore_eos} the model goes on past the script).
     */
    public int budget(int maxTokens, boolean ignoreEos) {
      return stops(maxTokens, ignoreEos) ? tokens.length : maxTokens;
    }

    /** Whether the model ends its turn ({@code stop}) rather than being cut at {@code maxTokens} ({@code length}). */
    public boolean stops(int maxTokens, boolean ignoreEos) {
      return !ignoreEos && tokens.length <= maxTokens;
    }
  }

  private final ChatAnswers answers;
  private final Map<Long, Generation> inFlight = new ConcurrentHashMap<>();
  private final AtomicLong keys = new AtomicLong(Long.MIN_VALUE);

  private ScriptedChatAnswers(ChatAnswers answers) {
    this.answers = Objects.requireNonNull(answers, "answers");
  }

  /**
   * The scripted chat answers of {@code output}'s token space as {@code encoder} encodes them, or null when the
   * encoder renders no chat (a token-ids-only worker: chat requests are refused anyway).
   */
  public static ScriptedChatAnswers of(ScriptedOutput output, PromptEncoder encoder) {
    try {
      return new ScriptedChatAnswers(encoder.chatAnswers(output.space()));
    } catch (PromptEncoder.Unsupported e) {
      return null;
    }
  }

  /**
   * The engine's output: a generation's script by its output seed, then (past its end, under {@code ignore_eos})
   * {@code fallback}'s tokens under the answer's seed, so they too are a function of the request; any other output
   * seed is {@code fallback}'s.
   */
  public OutputTokens over(OutputTokens fallback) {
    return (seed, index) -> {
      Generation g = inFlight.get(seed);
      if (g == null) {
        return fallback.tokenAt(seed, index);
      }
      return index < g.tokens().length ? g.tokens()[index]
          : fallback.tokenAt(g.answer() == null ? seed : g.answer().seed(), index);
    };
  }

  /** Starts generating the answer of {@code words} words named by {@code answerSeed}; end it with {@link #finished}. */
  public Generation start(long answerSeed, int words) {
    Segment answer = new Segment(answerSeed, words);
    int[] tokens = answers.tokens(answer);
    Generation g = new Generation(keys.getAndIncrement(), tokens, answer);
    inFlight.put(g.outputSeed(), g);
    return g;
  }

  /**
   * Starts generating a scripted tool-call answer ({@link ToolCallScript}: the template's rendering of the answer
   * through its end of turn); end it with {@link #finished}.
   */
  public Generation startToolCall(ToolCallScript script) {
    Generation g = new Generation(keys.getAndIncrement(), script.tokens(), null);
    inFlight.put(g.outputSeed(), g);
    return g;
  }

  /**
   * The text each generated token of {@code g} streams ({@link ChatAnswers#deltas}). It encodes every word prefix
   * of the answer, about a millisecond for a hundred words, so the server computes it after handing the request to
   * the engine, not inside its time to first token.
   */
  public String[] deltas(Generation g) {
    return answers.deltas(g.answer());
  }

  /** The generation under {@code outputSeed} ended (finished, failed or never submitted). */
  public void finished(long outputSeed) {
    inFlight.remove(outputSeed);
  }
}
