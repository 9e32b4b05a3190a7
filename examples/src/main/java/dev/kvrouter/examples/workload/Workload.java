package dev.kvrouter.examples.workload;

import dev.kvrouter.examples.sim.engine.MediaSpan;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A fixed list of requests in arrival order, built deterministically from a seed by a generator
 * ({@link WorkloadCatalog}). Immutable and safe to share between threads; token ids and chat text are rendered
 * on demand, and the ideal reuse is computed once per block size.
 */
public final class Workload {

  /** Role ids standing in for chat-template markers in {@link #promptTokens} of chat prompts. */
  private static final Map<String, Integer> ROLE_MARKERS = Map.of("system", 1, "user", 2, "assistant", 3);
  private static final int OTHER_ROLE_MARKER = 4;
  private static final int END_OF_MESSAGE = 5;
  /** The workload parameter sent as {@code chat_template_kwargs.enable_thinking} unless {@code default}. */
  public static final String ENABLE_THINKING = "enable_thinking";
  /** Stands in for every token of an image's expansion (as Gemma 3's soft tokens are all one id). */
  static final int IMAGE_TOKEN = 6;

  private final String name;
  private final Map<String, Object> params;
  private final TokenSpace tokenSpace;
  private final List<WorkloadRequest> requests;
  private final boolean scriptsAnswers;
  private final boolean hasImages;
  private final Map<Integer, IdealReuse> idealByBlockSize = new ConcurrentHashMap<>();
  /** Rendered once: every Messages request resends the same list. */
  private volatile List<AgentTools.Tool> agentTools;

  /**
   * @param name what the workload is, e.g. {@code system-prompt}
   * @param params every effective parameter, defaults included, so a report can rebuild it
   * @param requests the requests; sorted here by arrival (stable), then renumbered
   */
  public Workload(String name, Map<String, Object> params, TokenSpace tokenSpace, List<WorkloadRequest> requests) {
    this.name = Objects.requireNonNull(name, "name");
    this.params = Collections.unmodifiableMap(new LinkedHashMap<>(params));
    this.tokenSpace = Objects.requireNonNull(tokenSpace, "tokenSpace");
    List<WorkloadRequest> sorted = new ArrayList<>(requests);
    sorted.sort(Comparator.comparingLong(WorkloadRequest::arrivalMicros));
    List<WorkloadRequest> numbered = new ArrayList<>(sorted.size());
    for (int i = 0; i < sorted.size(); i++) {
      WorkloadRequest r = sorted.get(i);
      numbered.add(r.index() == i ? r : r.withIndex(i, r.arrivalMicros()));
    }
    this.requests = List.copyOf(numbered);
    this.scriptsAnswers = this.requests.stream().anyMatch(r -> r.answer() != null);
    this.hasImages = this.requests.stream().anyMatch(r -> r.prompt().imageCount() > 0);
  }

  public String name() {
    return name;
  }

  public Map<String, Object> params() {
    return params;
  }

  public TokenSpace tokenSpace() {
    return tokenSpace;
  }

  public List<WorkloadRequest> requests() {
    return requests;
  }

  public int size() {
    return requests.size();
  }

  /** Arrival of the last request. */
  public long spanMicros() {
    return requests.isEmpty() ? 0 : requests.get(requests.size() - 1).arrivalMicros();
  }

  /**
   * The prompt as token ids. Exact for {@link Prompt.Format#TOKENS} prompts (what is sent). For chat prompts,
   * a stand-in for the templated prompt: per message a role marker, the segment tokens and an end marker
   * (ids below 8, outside the {@link TokenSpace}), then the assistant's role marker, as a real template's
   * generation prompt ends; it shares exactly what the rendered messages share, up to the few template tokens per
   * message, and is what {@link #idealReuse(int)} uses for chat workloads. With {@link #answerTokens} (a chat
   * answer ends with the end marker), prompt + answer is a prefix of the next turn's stand-in, as with a real
   * template, so an engine's cached answer blocks match the resent history.
   */
  public int[] promptTokens(WorkloadRequest r) {
    return promptTokens(r.prompt());
  }

  /** {@link #promptTokens(WorkloadRequest)} of a prompt of this workload, e.g. one with answers cut short. */
  public int[] promptTokens(Prompt p) {
    return promptIds(p).tokens();
  }

  /**
   * {@link #promptTokens(WorkloadRequest)} with its images: each image of a message is {@link
   * ImagePart#STAND_IN_TOKENS} tokens {@value #IMAGE_TOKEN} after the role marker, placed with its
   * {@link ImagePart#engineIdentity()}, so equal ids of different images never look like shared blocks.
   */
  public PromptIds promptIds(WorkloadRequest r) {
    return promptIds(r.prompt());
  }

  /** {@link #promptIds(WorkloadRequest)} of a prompt of this workload. */
  public PromptIds promptIds(Prompt p) {
    boolean chat = p.format().templated();
    // chat: role and end marker per message, and the generation prompt's assistant marker
    int n = p.contentLength() + (chat ? 2 * p.messages().size() + 1 : 0) + p.imageCount() * ImagePart.STAND_IN_TOKENS;
    int[] t = new int[n];
    List<MediaSpan> media = p.imageCount() == 0 ? List.of() : new ArrayList<>(p.imageCount());
    int off = 0;
    for (Message m : p.messages()) {
      if (chat) {
        t[off++] = ROLE_MARKERS.getOrDefault(m.role(), OTHER_ROLE_MARKER);
      }
      for (ImagePart image : m.images()) {
        media.add(new MediaSpan(image.engineIdentity(), off, ImagePart.STAND_IN_TOKENS));
        java.util.Arrays.fill(t, off, off + ImagePart.STAND_IN_TOKENS, IMAGE_TOKEN);
        off += ImagePart.STAND_IN_TOKENS;
      }
      for (Segment s : m.segments()) {
        off = tokenSpace.fill(s, t, off);
      }
      if (chat) {
        t[off++] = END_OF_MESSAGE;
      }
    }
    if (chat) {
      // the generation prompt: without it, the answer the engine caches after the prompt would sit where the next
      // turn has the assistant marker, and no answer block would ever match
      t[off++] = ROLE_MARKERS.get("assistant");
    }
    return new PromptIds(t, media);
  }

  /**
   * The scripted answer's token ids ({@link WorkloadRequest#answer}), or {@code null} when the engine picks its
   * own output: what an engine whose output is {@link TokenSpace#token}{@code (answer.seed(), i)} generates. For a
   * chat prompt, followed by the end marker of the {@link #promptTokens stand-in}: a chat model ends its turn with
   * its end-of-turn token, which the next turn's template puts after the resent answer too.
   */
  public int[] answerTokens(WorkloadRequest r) {
    if (r.answer() == null) {
      return null;
    }
    int[] answer = tokenSpace.tokens(r.answer());
    if (!r.prompt().format().templated()) {
      return answer;
    }
    int[] t = java.util.Arrays.copyOf(answer, answer.length + 1);
    t[answer.length] = END_OF_MESSAGE;
    return r.generated(t);
  }

  /** Whether any request sends images (then it needs a multimodal model's request path to be served). */
  public boolean hasImages() {
    return hasImages;
  }

  /**
   * Whether its prompts are chat messages (sent to {@code /v1/chat/completions}, or to {@code /v1/messages}: both
   * rendered by the chat template).
   */
  public boolean chatPrompts() {
    return !requests.isEmpty() && requests.get(0).prompt().format().templated();
  }

  /**
   * The tools its Messages requests list ({@link AgentTools#tools}, from the workload's {@code seed}, {@code tools}
   * and {@code tool_text}).
   */
  public List<AgentTools.Tool> agentTools() {
    List<AgentTools.Tool> t = agentTools;
    if (t == null) {
      t = AgentTools.tools(seed(), Integer.parseInt(String.valueOf(params.get("tools"))),
          Integer.parseInt(String.valueOf(params.get("tool_text"))), tokenSpace);
      agentTools = t;
    }
    return t;
  }

  /**
   * The words of thinking each scripted answer opens with ({@code multi-turn} {@code reasoning}, with
   * {@code format=messages} or {@code chat}; 0, none, for every other workload).
   */
  public int agentReasoning() {
    Object r = params.get("reasoning");
    return r == null ? 0 : Integer.parseInt(String.valueOf(r));
  }

  /** The {@code seed} parameter (1, the generators' default, when it has none). */
  public long seed() {
    Object v = params.get("seed");
    return v == null ? 1 : Long.parseLong(v.toString());
  }

  /** Whether any request scripts its answer, i.e. later prompts resend the model's own output. */
  public boolean scriptsAnswers() {
    return scriptsAnswers;
  }

  /** The chat messages of a chat prompt, text rendered by {@link ChatText}. */
  public List<ChatMessage> chatMessages(WorkloadRequest r) {
    if (!r.prompt().format().templated()) {
      throw new IllegalArgumentException(r.id() + " is a token prompt, not chat");
    }
    return chatMessages(r.prompt());
  }

  /**
   * {@link #chatMessages(WorkloadRequest)} of a chat prompt of this workload, e.g. one with answers cut to what the
   * client received: a scripted answer's message is its text ({@link ChatAnswers#text}), as the client keeps it.
   */
  public List<ChatMessage> chatMessages(Prompt p) {
    if (!p.format().templated()) {
      throw new IllegalArgumentException("a token prompt, not chat");
    }
    List<ChatMessage> out = new ArrayList<>(p.messages().size());
    for (Message m : p.messages()) {
      if (p.format() == Prompt.Format.CHAT && m.role().equals("assistant") && m.segments().size() == 2) {
        // a reasoning model's answer: its text, and its thinking as the reasoning vLLM returned beside it
        out.add(new ChatMessage(m.role(), m.images(), ChatText.render(m.segments().subList(0, 1), tokenSpace),
            ChatText.render(m.segments().subList(1, 2), tokenSpace)));
      } else {
        out.add(new ChatMessage(m.role(), m.images(), ChatText.render(m.segments(), tokenSpace)));
      }
    }
    return out;
  }

  /**
   * Ideal reuse at {@code blockSize}, over {@link #promptIds} (image blocks keyed by the engine's identity of the
   * image), with the blocks scripted answers fill ({@link #answerTokens}) cached as the engine caches them;
   * computed once per block size.
   */
  public IdealReuse idealReuse(int blockSize) {
    return idealByBlockSize.computeIfAbsent(blockSize,
        b -> IdealReuse.compute(requests, this::promptIds, this::answerTokens, b, Long.MAX_VALUE));
  }

  /**
   * The {@code chat_template_kwargs} its chat requests carry: {@code enable_thinking} when the workload sets it,
   * else none.
   */
  public Map<String, Object> chatTemplateKwargs() {
    Object v = params.get(ENABLE_THINKING);
    return v == null || "default".equals(v) ? Map.of() : Map.of(ENABLE_THINKING, Boolean.parseBoolean(v.toString()));
  }

  /** Sum of content tokens over all prompts. */
  public long contentTokens() {
    long n = 0;
    for (WorkloadRequest r : requests) {
      n += r.prompt().contentLength();
    }
    return n;
  }

  /**
   * The first {@code n} requests, rounded down to whole sibling groups ({@link #wholeGroups}), so a best-of-N group
   * is sent whole or not at all; all of them when {@code n <= 0} or {@code n >= size()}. Empty when the first group
   * alone is larger than {@code n}.
   */
  public Workload head(int n) {
    if (n <= 0 || n >= requests.size()) {
      return this;
    }
    int k = wholeGroups(n);
    Map<String, Object> p = new LinkedHashMap<>(params);
    p.put("head", k);
    return new Workload(name, p, tokenSpace, requests.subList(0, k));
  }

  /**
   * The largest count {@code <= n} of leading requests that does not split a group of siblings: requests of one
   * {@code sessionId} arriving at the same instant (best-of-N's N copies of a prompt). A cap by count alone would
   * send part of a group, and the cut group's lone siblings would measure cache reuse the workload does not have.
   * Turns of a conversation arrive at different instants, so they are not siblings and are cut one by one.
   */
  public int wholeGroups(int n) {
    int k = Math.max(0, Math.min(n, requests.size()));
    while (k > 0 && k < requests.size() && siblings(requests.get(k - 1), requests.get(k))) {
      k--;
    }
    return k;
  }

  private static boolean siblings(WorkloadRequest a, WorkloadRequest b) {
    return a.sessionId() != null && a.sessionId().equals(b.sessionId()) && a.arrivalMicros() == b.arrivalMicros();
  }

  /** The requests arriving before {@code maxArrivalMicros} (all if none is later). */
  public Workload until(long maxArrivalMicros) {
    int n = 0;
    while (n < requests.size() && requests.get(n).arrivalMicros() < maxArrivalMicros) {
      n++;
    }
    if (n == requests.size()) {
      return this;
    }
    Map<String, Object> p = new LinkedHashMap<>(params);
    p.put("until_us", maxArrivalMicros);
    return new Workload(name, p, tokenSpace, requests.subList(0, n));
  }

  @Override
  public String toString() {
    return name + params + " (" + requests.size() + " requests)";
  }
}
