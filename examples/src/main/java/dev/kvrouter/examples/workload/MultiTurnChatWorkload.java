package dev.kvrouter.examples.workload;

import java.util.ArrayList;
import java.util.List;

/**
 * Multi-turn chat sessions: each turn resends the whole conversation so far (a system prompt shared by every
 * session, then alternating user and assistant messages) plus a new user message, so turn k+1 extends turn k's
 * prompt. Sessions start at {@code rate} per second; the next turn of a session is planned an exponential think
 * time after the previous one's plan.
 *
 * <p>{@code answers} says what the assistant messages resent in later turns are:
 * <ul>
 *   <li>{@code model} (the default for {@code format=tokens} and {@code format=messages}): the model's own answer to
 *       the previous turn, as vLLM's
 *       multi-turn benchmark ({@code benchmark_serving_multi_turn.py}, {@code send_turn}) and every chat client keep
 *       it. Each request scripts its answer ({@link WorkloadRequest#answer}) and the driver makes the simulated engine
 *       generate exactly it (a pure function of the request, as greedy decoding is), so the worker that served turn k
 *       holds the KV of its answer when turn k+1 arrives. With {@code format=tokens} the answer is token ids and is
 *       resent token for token. With {@code format=chat} it is text (the segment's words, {@link ChatText}): the engine
 *       generates the tokenizer's encoding of that text and the template's end-of-turn token ({@link ChatAnswers})
 *       as far as the request's {@code max_tokens} (the answer's words) lets it: the end of turn is cut, as vLLM
 *       cuts a model at {@code max_tokens} ({@link WorkloadRequest#generated}); the client receives the text and
 *       resends it as the assistant message, which the next request's chat template renders and the tokenizer
 *       re-tokenizes: what survives of the answer's cached blocks is then the template's doing ({@link AnswerReuse}).
 *       If a turn fails or is cut short, the driver resends what the client received
 *       ({@link Prompt#withAnswersCut}). Through HTTP the load generator does the same, with each request's answer seed
 *       as its OpenAI {@code seed}: simulated workers started with {@code --output-tokens workload} generate the token
 *       script from it (a worker that picks its own tokens makes the answers fresh in effect; the run's notes say
 *       which).
 *   <li>{@code fresh} (the default for {@code format=chat}, as before chat answers could be scripted): an assistant
 *       message of the length the turn asked for but of tokens (words) the model never
 *       produced, so no worker holds its KV.
 * </ul>
 * The two give the same prompts for the same seed; only whether the engine's output matches them differs.
 *
 * <p>{@code enable_thinking=true|false} (chat only; {@code default}: not sent) is sent as the request's
 * {@code chat_template_kwargs}: Qwen3's template then opens the generation prompt with an empty think block
 * ({@code false}), which its history rendering later drops.
 *
 * <p>{@code loop}: {@code closed} (the default with model answers, which require it) sends a turn no earlier than
 * the previous turn of its session finished (its planned time otherwise; {@link WorkloadRequest#after}), open loop
 * across sessions, as vLLM's benchmark clients do. {@code open} (the default with fresh answers, the behaviour
 * before model answers existed) sends every turn at its planned time whether or not the answer came back.
 *
 * <p>{@code context=a} (0, the default, turns it off) opens each session's first user message with a context of
 * its own (a pasted document, earlier history), lognormal with mean {@code a} and median 0.85 a, capped at
 * {@code context_max}: the conversation prefix of vLLM's multi-turn benchmark generator
 * ({@code benchmarks/multi_turn/generate_multi_turn.json}: a 500-token prefix shared by all conversations,
 * lognormal per-conversation prefix with average 1,000 and max 5,000, 12-18 messages, i.e. 6-9 user turns, of
 * 120-160 tokens, answers of 80-120).
 *
 * <p>{@code format=messages} sends each turn to Anthropic's {@code /v1/messages} as Claude Code does (model answers
 * by default: each request scripts its answer, text then a {@code tool_use} ({@link AgentAnswer}), in
 * {@code vllm_xargs}, {@link ToolCallAnswer}, with Claude Code's {@code max_tokens}; {@code answers=fresh} resends
 * answers no engine generated): {@code system} blocks (the per-request attribution block,
 * Claude Code's identity line, the shared system prompt), {@code tools} tools ({@link AgentTools}, descriptions of
 * {@code tool_text} words), and the history as blocks: each answer is its text then a {@code tool_use}, and each
 * later user message opens with that tool's {@code tool_result} of {@code result} tokens before the user's text; an
 * inline {@code system} reminder of {@code reminder} tokens follows every user message and stays in the history.
 * {@code reasoning=N} (0, the default, turns it off) makes each answer a reasoning model's: {@code N} words of
 * thinking before the text, scripted in {@code vllm_xargs.answer_reasoning} (a worker generates the think block
 * when the template leaves thinking on, Qwen3's default) and resent as a {@code thinking} block, as Claude Code does.
 * With {@code format=chat} (and {@code answers=model}) it does the same for chat answers: the thinking and the text
 * scripted in {@code vllm_xargs} with no call ({@link AgentAnswer#chatScript}), the turn ended by the model rather
 * than cut by {@code max_tokens}, and the thinking resent as the assistant message's {@code reasoning}, the field
 * vLLM's chat answer carries it in.
 *
 * <p>Options: {@code seed=1 sessions=60 rate=2 arrival=poisson turns=2..8 think=8 system=256 context=0
 * context_max=5000 user=32..256 output=32..256 format=chat|tokens|messages vocab=1000..128000 answers=model|fresh
 * loop=closed|open enable_thinking=true|false reasoning=0} ({@code reasoning} with {@code format=chat} or
 * {@code messages}); with {@code format=messages} also {@code tools=12 tool_text=160 result=64..1024 reminder=48}.
 */
public final class MultiTurnChatWorkload {

  public static final String NAME = "multi-turn";

  private MultiTurnChatWorkload() {}

  public static Workload build(WorkloadOptions o) {
    long seed = o.longValue("seed", 1);
    int sessions = o.intValue("sessions", 60);
    double rate = o.doubleValue("rate", 2);
    Arrival arrival = o.arrival();
    IntRange turns = o.range("turns", new IntRange(2, 8));
    double think = o.doubleValue("think", 8);
    int system = o.intValue("system", 256);
    double context = o.doubleValue("context", 0);
    int contextMax = o.intValue("context_max", 5000);
    IntRange user = o.range("user", new IntRange(32, 256));
    IntRange output = o.range("output", new IntRange(32, 256));
    Prompt.Format format = o.format(Prompt.Format.CHAT, true);
    boolean agent = format == Prompt.Format.MESSAGES;
    TokenSpace space = o.tokenSpace();
    String answers = o.string("answers", format == Prompt.Format.CHAT ? "fresh" : "model");
    boolean model = switch (answers) {
      case "model" -> true;
      case "fresh" -> false;
      default -> throw new IllegalArgumentException(NAME + ": answers must be model or fresh, was " + answers);
    };
    String loop = o.string("loop", model ? "closed" : "open");
    boolean closed = switch (loop) {
      case "closed" -> true;
      case "open" -> false;
      default -> throw new IllegalArgumentException(NAME + ": loop must be closed or open, was " + loop);
    };
    String thinking = o.string(Workload.ENABLE_THINKING, "default");
    if (!List.of("default", "true", "false").contains(thinking)) {
      throw new IllegalArgumentException(NAME + ": enable_thinking must be true or false, was " + thinking);
    }
    int tools = agent ? o.intValue("tools", 12) : 0;
    int toolText = agent ? o.intValue("tool_text", 160) : 0;
    IntRange result = agent ? o.range("result", new IntRange(64, 1024)) : null;
    int reminder = agent ? o.intValue("reminder", 48) : 0;
    int reasoning = agent || format == Prompt.Format.CHAT ? o.intValue("reasoning", 0) : 0;
    o.rejectUnknown(NAME);
    if (reasoning < 0 || agent && (tools < 1 || tools > AgentTools.max() || toolText < 0 || reminder < 0)) {
      throw new IllegalArgumentException(NAME + ": tools must be 1.." + AgentTools.max()
          + ", tool_text, reminder and reasoning >= 0");
    }
    if (reasoning > 0 && !model) {
      throw new IllegalArgumentException(NAME + ": reasoning needs answers=model (no engine writes a fresh answer's "
          + "thinking)");
    }
    if (!thinking.equals("default") && format != Prompt.Format.CHAT) {
      throw new IllegalArgumentException(NAME + ": enable_thinking is a chat template argument; it needs format=chat");
    }
    if (model && !closed) {
      throw new IllegalArgumentException(NAME + ": answers=model needs loop=closed (a client cannot resend an "
          + "answer it has not received)");
    }
    if (turns.min() < 1 || think < 0 || context < 0 || contextMax < 1) {
      throw new IllegalArgumentException(NAME + ": turns must be >= 1, think and context >= 0, context_max >= 1");
    }
    Rng rng = new Rng(Rng.derive(seed, 0x4D54));
    Segment systemPrompt = new Segment(Rng.derive(seed, 10), system);
    List<WorkloadRequest> out = new ArrayList<>();
    long start = 0;
    for (int s = 0; s < sessions; s++) {
      if (s > 0) {
        start += arrival.nextGapMicros(rng, rate);
      }
      int n = turns.draw(rng);
      List<Message> history = new ArrayList<>();
      if (system > 0) {
        history.add(Message.of("system", systemPrompt));
      }
      int sessionContext = context > 0 ? (int) Math.min(contextMax, Math.round(lognormal(rng, context))) : 0;
      long t = start;
      String previous = null;
      for (int k = 0; k < n; k++) {
        if (k > 0) {
          t += Math.round(rng.nextExponential(think * 1e6));
        }
        if (agent && k > 0) {
          // the result of the tool the previous answer called, which opens the next user message
          history.add(Message.of("tool", new Segment(Rng.derive(seed, 15, s, k), Math.max(1, result.draw(rng)))));
        }
        Segment said = new Segment(Rng.derive(seed, 11, s, k), Math.max(1, user.draw(rng)));
        history.add(k == 0 && sessionContext > 0
            ? Message.of("user", new Segment(Rng.derive(seed, 13, s), sessionContext), said)
            : Message.of("user", said));
        if (agent && reminder > 0) {
          // Claude Code's inline system reminder, appended on every turn and kept in the history after it
          history.add(Message.of("system", new Segment(Rng.derive(seed, 16, s, k), reminder)));
        }
        int answer = Math.max(1, output.draw(rng));
        Prompt p = switch (format) {
          case CHAT -> Prompt.chat(history);
          case MESSAGES -> Prompt.anthropic(history);
          case TOKENS -> Prompt.tokens(flatten(history));
        };
        // the same segment either way: with model answers the engine generates it, with fresh ones nobody does
        Segment reply = new Segment(Rng.derive(seed, 12, s, k), answer);
        String id = NAME + "-" + s + "-" + k;
        out.add(new WorkloadRequest(0, id, t, "session-" + s, p, answer, model ? reply : null,
            closed && k > 0 ? previous : null, model ? reasoning : 0));
        previous = id;
        if (agent) {
          // the answer's text, then a tool_use whose input is a quarter of the answer's words
          history.add(AgentAnswer.of(reply, reasoning).message());
        } else if (reasoning > 0) {
          // a reasoning model's chat answer: the text, then the thinking the client resends beside it
          history.add(Message.of("assistant", reply, AgentAnswer.thinking(reply, reasoning)));
        } else {
          history.add(Message.of("assistant", reply));
        }
      }
    }
    return new Workload(NAME, o.effective(), space, out);
  }

  /**
   * Lognormal with the given mean and median 0.85 x mean, the skew vLLM's generator uses by default:
   * sigma^2 = 2 ln(mean / median), mu = ln(median).
   */
  static double lognormal(Rng rng, double mean) {
    double median = 0.85 * mean;
    double sigma = Math.sqrt(2 * Math.log(mean / median));
    return Math.exp(Math.log(median) + sigma * rng.nextGaussian());
  }

  private static List<Segment> flatten(List<Message> history) {
    List<Segment> segs = new ArrayList<>();
    for (Message m : history) {
      segs.addAll(m.segments());
    }
    return segs;
  }
}
