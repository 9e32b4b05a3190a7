package dev.kvrouter.extproc.pipeline;

import dev.kvrouter.extproc.model.InlineSystemMode;
import dev.kvrouter.extproc.model.MessagesDialect;
import dev.kvrouter.extproc.template.ChatRequestFields;
import dev.kvrouter.extproc.template.VllmChatRenderer;
import dev.kvrouter.extproc.tokenize.Segment;
import dev.kvrouter.extproc.tokenize.Tokenizer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Decides a model's {@link MessagesDialect} the way vLLM probes its renderer for the Messages API.
 *
 * <p>Inline system messages, when {@code --anthropic-inline-system} is left at {@code auto}
 * (vllm/entrypoints/anthropic/inline_system.py, {@code _Prober}): render three small conversations with and without
 * an inline system message, and keep such messages in place only if the template renders each one as a distinct
 * system turn that changes nothing else in the prompt.
 *
 * <p>The effort for disabled thinking ({@code AnthropicServingMessages._probe_disabled_thinking_effort}): "none",
 * unless the template refuses it or renders it as it renders one of the efforts, then "low".
 *
 * <p>vLLM compares token ids and decodes them; here the insertion is found on token ids the same way, and what vLLM
 * reads from decoded text is read from the rendered text (the probe's words are plain ASCII, so the two agree), with
 * the added tokens the tokenizer finds in that text standing for its special ids.
 */
final class MessagesDialectProbe {

  // each text starts and ends with its own word, so the inserted segment starts exactly at the inserted message
  private static final String SYS0 = "Alpha leading instructions";
  private static final String USER1 = "Bravo first question";
  private static final String ASSISTANT1 = "Charlie first answer";
  private static final String USER2 = "Delta second question";
  private static final String INLINE = "Echo inline note";
  private static final String REASONING = "Foxtrot prior reasoning";
  private static final String TOOL_CALL_ID = "probe0001";

  /** The outcome and vLLM's wording of why inline system messages go where they go, for the log. */
  record Result(MessagesDialect dialect, String reason) {}

  private record Case(String name, List<Map<String, Object>> messages, int index) {}

  private record Rendered(int[] ids, String text) {}

  private record Insertion(int position, int[] segment) {}

  /** The base (re-rendered if the template's output moved, e.g. with the date), the new prompt, the insertion. */
  private record Inserted(Rendered base, Rendered added, Insertion found) {}

  private final VllmChatRenderer renderer;
  private final Tokenizer tokenizer;

  private MessagesDialectProbe(VllmChatRenderer renderer, Tokenizer tokenizer) {
    this.renderer = renderer;
    this.tokenizer = tokenizer;
  }

  /** Efforts a Messages request may carry ({@code AnthropicEffort}), in vLLM's order. */
  private static final String[] EFFORTS = {"low", "medium", "high", "xhigh", "max"};

  /**
   * The model's dialect: the inline-system probe on {@code withTools} (the probe renders a tool), the effort probe on
   * {@code plain}; both null without a chat template.
   */
  static Result probe(VllmChatRenderer plain, VllmChatRenderer withTools, Tokenizer tokenizer) {
    Result inline = inlineSystem(withTools, tokenizer);
    String effort = plain == null ? "none" : new MessagesDialectProbe(plain, tokenizer).disabledThinkingEffort();
    return new Result(new MessagesDialect(inline.dialect().inlineSystem(), effort), inline.reason());
  }

  /** The effort sent for disabled thinking: "low" where "none" renders as an effort does, or not at all. */
  private String disabledThinkingEffort() {
    Rendered none = renderUser("none");
    if (none == null) {
      return "low";
    }
    for (String effort : EFFORTS) {
      Rendered r = renderUser(effort);
      if (r != null && Arrays.equals(r.ids(), none.ids()) && r.text().equals(none.text())) {
        return "low";
      }
    }
    return "none";
  }

  private Rendered renderUser(String effort) {
    return render(List.of(message("user", "Hi")), null, effort);
  }

  /** The mode for {@code renderer}'s template (the one requests with tools use, as the probe renders a tool). */
  static Result inlineSystem(VllmChatRenderer renderer, Tokenizer tokenizer) {
    if (renderer == null) {
      return fold("the model has no chat template");
    }
    try {
      return new MessagesDialectProbe(renderer, tokenizer).run();
    } catch (RuntimeException e) {
      return fold("the probe failed: " + e.getClass().getSimpleName());
    }
  }

  private static Result fold(String reason) {
    return new Result(MessagesDialect.DEFAULT.withInlineSystem(InlineSystemMode.FOLD), reason);
  }

  private Result run() {
    List<Rendered> evaluated = null;
    // Claude Code sets an effort, and some templates keep reasoning in history only when thinking is on
    for (String effort : new String[] {"high", null}) {
      List<Case> cases = new ArrayList<>();
      List<Rendered> bases = new ArrayList<>();
      for (Case c : cases()) {
        Rendered base = render(c.messages(), effort);
        if (base == null && c.messages().stream().anyMatch(m -> m.containsKey("reasoning"))) {
          // some templates refuse reasoning in history: probe without it
          c = new Case(c.name(), withoutReasoning(c.messages()), c.index());
          base = render(c.messages(), effort);
        }
        if (base == null) {
          break;
        }
        cases.add(c);
        bases.add(base);
      }
      if (bases.size() != 3 || sameIds(bases, evaluated)) {
        continue;
      }
      evaluated = bases;
      for (int i = 0; i < cases.size(); i++) {
        String reason = check(cases.get(i), bases.get(i), effort);
        if (reason != null) {
          return fold(reason + " (reasoning_effort=" + effort + ")");
        }
      }
    }
    if (evaluated == null) {
      return fold("the probe conversations could not be rendered");
    }
    return new Result(MessagesDialect.DEFAULT, "the renderer marks them as distinct system turns");
  }

  /** Why an inline system message is unsafe to keep in place in this case, or null. */
  private String check(Case c, Rendered base, String effort) {
    Inserted r = insert(c.messages(), base, c.index(), message("system", INLINE), effort);
    base = r.base();
    Rendered added = r.added();
    Insertion found = r.found();
    if (added == null) {
      return c.name() + ": renderer rejects it";
    }
    if (!added.text().contains(INLINE)) {
      return c.name() + ": renderer drops it";
    }
    if (found == null) {
      return c.name() + ": rendering it changes other parts of the prompt";
    }
    if (c.index() == c.messages().size() && found.position() >= base.ids().length) {
      return c.name() + ": it lands after the generation prompt";
    }
    if (count(insertedText(base.text(), added.text()), INLINE) != 1) {
      return c.name() + ": it is not rendered as its own segment";
    }
    if (!hasAddedToken(found.segment(), added.text())) {
      return c.name() + ": it has no role marker";
    }
    if (c.name().equals("mid")) {
      Insertion asUser = insert(c.messages(), base, c.index(), message("user", INLINE), effort).found();
      if (asUser != null && Arrays.equals(asUser.segment(), found.segment())) {
        return c.name() + ": it renders the same as a user message";
      }
    }
    if (base.text().contains(REASONING) != added.text().contains(REASONING)) {
      return c.name() + ": it changes which reasoning is kept";
    }
    return null;
  }

  private Inserted insert(List<Map<String, Object>> messages, Rendered base, int index, Map<String, Object> message,
      String effort) {
    List<Map<String, Object>> with = new ArrayList<>(messages.subList(0, index));
    with.add(message);
    with.addAll(messages.subList(index, messages.size()));
    Rendered added = render(with, effort);
    Insertion found = added == null ? null : insertion(base.ids(), added.ids());
    if (added != null && found == null) {
      Rendered retry = render(messages, effort);
      if (retry != null && !Arrays.equals(retry.ids(), base.ids())) {
        base = retry;
        added = render(with, effort);
        found = added == null ? null : insertion(base.ids(), added.ids());
      }
    }
    return new Inserted(base, added, found);
  }

  /** {@code (p, seg)} when {@code added == base[:p] + seg + base[p:]}, else null. */
  private static Insertion insertion(int[] base, int[] added) {
    int p = 0;
    int min = Math.min(base.length, added.length);
    while (p < min && base[p] == added[p]) {
      p++;
    }
    int s = 0;
    while (s < min - p && base[base.length - 1 - s] == added[added.length - 1 - s]) {
      s++;
    }
    if (p + s != base.length) {
      return null;
    }
    return new Insertion(p, Arrays.copyOfRange(added, p, added.length - s));
  }

  /** The text {@code added} holds beyond {@code base}, matched the same way on characters; "" when none. */
  private static String insertedText(String base, String added) {
    int p = 0;
    int min = Math.min(base.length(), added.length());
    while (p < min && base.charAt(p) == added.charAt(p)) {
      p++;
    }
    int s = 0;
    while (s < min - p && base.charAt(base.length() - 1 - s) == added.charAt(added.length() - 1 - s)) {
      s++;
    }
    return p + s == base.length() ? added.substring(p, added.length() - s) : "";
  }

  private boolean hasAddedToken(int[] segment, String text) {
    Set<Integer> added = new HashSet<>();
    for (Segment s : tokenizer.segments(text)) {
      if (s.isAddedToken()) {
        added.add(s.addedTokenId());
      }
    }
    for (int id : segment) {
      if (added.contains(id)) {
        return true;
      }
    }
    return false;
  }

  private Rendered render(List<Map<String, Object>> messages, String effort) {
    return render(messages, List.of(tool()), effort);
  }

  /**
   * The prompt of a chat request with {@code reasoning_effort} set, as vLLM's current chat path builds its kwargs
   * ({@code build_chat_params}: the effort also turns {@code enable_thinking} on, off for "none").
   */
  private Rendered render(List<Map<String, Object>> messages, List<Map<String, Object>> tools, String effort) {
    try {
      // the preprocessing rewrites messages (tool-call arguments): each render gets its own copies
      Map<String, Object> kwargs = effort == null ? null : Map.of("enable_thinking", !effort.equals("none"));
      String text = renderer.render(new ChatRequestFields(copy(messages), tools, null, true, false, null, kwargs,
          effort));
      return new Rendered(tokenizer.encode(text, false), text);
    } catch (RuntimeException e) {
      return null; // vLLM: "Inline system probe render failed"
    }
  }

  private static boolean sameIds(List<Rendered> a, List<Rendered> b) {
    if (b == null || a.size() != b.size()) {
      return false;
    }
    for (int i = 0; i < a.size(); i++) {
      if (!Arrays.equals(a.get(i).ids(), b.get(i).ids())) {
        return false;
      }
    }
    return true;
  }

  private static int count(String s, String sub) {
    int n = 0;
    for (int i = s.indexOf(sub); i >= 0; i = s.indexOf(sub, i + sub.length())) {
      n++;
    }
    return n;
  }

  private static List<Case> cases() {
    Map<String, Object> call = new LinkedHashMap<>();
    call.put("id", TOOL_CALL_ID);
    call.put("type", "function");
    call.put("function", map("name", "probe_tool", "arguments", "{}"));
    Map<String, Object> assistantTool = message("assistant", null);
    assistantTool.remove("content");
    assistantTool.put("reasoning", REASONING);
    assistantTool.put("tool_calls", List.of(call));
    Map<String, Object> toolOutput = message("tool", "Golf output");
    toolOutput.put("tool_call_id", TOOL_CALL_ID);
    return List.of(
        new Case("mid", List.of(message("system", SYS0), message("user", USER1), message("assistant", ASSISTANT1),
            message("user", USER2)), 3),
        new Case("after_tool", List.of(message("system", SYS0), message("user", USER1), assistantTool, toolOutput), 4),
        new Case("trailing", List.of(message("system", SYS0), message("user", USER1)), 2));
  }

  /** The probe's tool as the chat path dumps it. */
  private static Map<String, Object> tool() {
    return map("type", "function", "function", map("name", "probe_tool", "description", "Probe tool.",
        "parameters", map("type", "object", "properties", new LinkedHashMap<>())));
  }

  private static List<Map<String, Object>> withoutReasoning(List<Map<String, Object>> messages) {
    List<Map<String, Object>> out = new ArrayList<>();
    for (Map<String, Object> m : messages) {
      Map<String, Object> c = new LinkedHashMap<>(m);
      c.remove("reasoning");
      out.add(c);
    }
    return out;
  }

  @SuppressWarnings("unchecked")
  private static <T> T copy(T value) {
    if (value instanceof Map<?, ?> m) {
      Map<String, Object> out = new LinkedHashMap<>();
      m.forEach((k, v) -> out.put((String) k, copy(v)));
      return (T) out;
    }
    if (value instanceof List<?> l) {
      List<Object> out = new ArrayList<>();
      l.forEach(v -> out.add(copy(v)));
      return (T) out;
    }
    return value;
  }

  private static Map<String, Object> message(String role, Object content) {
    return map("role", role, "content", content);
  }

  private static Map<String, Object> map(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }
}
