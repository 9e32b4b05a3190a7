package dev.kvrouter.examples.workload;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * What a coding agent (Claude Code) sends to vLLM's {@code /v1/messages} besides the conversation, for
 * {@code multi-turn:format=messages}: its tool list and the attribution block that opens {@code system}.
 *
 * <p>The tools are Claude Code's, by name and parameters, with descriptions of {@code tool_text} words each
 * ({@link ChatText}, seeded by the workload's seed, so every session of a run sends the same list, as one Claude Code
 * version does). The attribution block ({@code x-anthropic-billing-header: ...; cch=<hash>;}) changes on every
 * request; vLLM and the router drop it, so it must not cost the prefix anything, which is what sending it checks.
 */
public final class AgentTools {

  /** One JSON-schema property of a tool's {@code input_schema}. */
  public record Param(String name, String type, String description) {}

  /** A tool as the Messages API lists it; its first parameter is a string, the one a {@code tool_use} fills. */
  public record Tool(String name, String description, List<Param> params) {}

  /** Claude Code's tools and their parameters ({@code name:type}), the first one a string. */
  private static final String[][] CATALOG = {
      {"Task", "description:string", "prompt:string", "subagent_type:string"},
      {"Bash", "command:string", "timeout:number", "description:string", "run_in_background:boolean"},
      {"Glob", "pattern:string", "path:string"},
      {"Grep", "pattern:string", "path:string", "glob:string", "output_mode:string", "head_limit:number"},
      {"LS", "path:string", "ignore:array"},
      {"ExitPlanMode", "plan:string"},
      {"Read", "file_path:string", "offset:number", "limit:number"},
      {"Edit", "file_path:string", "old_string:string", "new_string:string", "replace_all:boolean"},
      {"MultiEdit", "file_path:string", "edits:array"},
      {"Write", "file_path:string", "content:string"},
      {"NotebookEdit", "notebook_path:string", "cell_id:string", "new_source:string", "edit_mode:string"},
      {"WebFetch", "url:string", "prompt:string"},
      {"SlashCommand", "command:string"},
      {"WebSearch", "query:string", "allowed_domains:array", "blocked_domains:array"},
      {"BashOutput", "bash_id:string", "filter:string"},
      {"KillShell", "shell_id:string"},
  };

  /**
   * The {@code max_tokens} Claude Code sends: room for any answer, which ends at its own end of turn (the tool call),
   * never at the limit.
   */
  public static final int MAX_TOKENS = 32000;

  /** The second system block, as Claude Code sends it before its prompt. */
  public static final String IDENTITY = "You are Claude Code, Anthropic's official CLI for Claude.";

  private static final int PARAM_TEXT = 12;

  private AgentTools() {}

  /** The most tools a workload can list. */
  public static int max() {
    return CATALOG.length;
  }

  /** The first {@code count} tools, descriptions of {@code descriptionTokens} words, the same for equal arguments. */
  public static List<Tool> tools(long seed, int count, int descriptionTokens, TokenSpace space) {
    if (count < 1 || count > CATALOG.length) {
      throw new IllegalArgumentException("tools must be 1.." + CATALOG.length + ", was " + count);
    }
    List<Tool> out = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      String[] t = CATALOG[i];
      List<Param> params = new ArrayList<>(t.length - 1);
      for (int j = 1; j < t.length; j++) {
        String[] nt = t[j].split(":");
        params.add(new Param(nt[0], nt[1], "The " + nt[0].replace('_', ' ') + ": "
            + ChatText.render(List.of(new Segment(Rng.derive(seed, 0x50524D, i, j), PARAM_TEXT)), space)));
      }
      out.add(new Tool(t[0], t[0] + " tool. "
          + ChatText.render(List.of(new Segment(Rng.derive(seed, 0x544F4F4C, i), descriptionTokens)), space), params));
    }
    return List.copyOf(out);
  }

  /** The tool a {@code tool_use} with this input calls: a function of the input's seed, so resends repeat it. */
  public static Tool toolFor(List<Tool> tools, Segment input) {
    return tools.get((int) Math.floorMod(input.seed(), (long) tools.size()));
  }

  /**
   * The {@code tool_use} an answer with this input makes: {@link #toolFor}'s tool, {@link #toolUseId}, and the input's
   * words as the tool's first (string) parameter.
   */
  public static ToolCallAnswer.Call toolCall(List<Tool> tools, Segment input, TokenSpace space) {
    Tool tool = toolFor(tools, input);
    return new ToolCallAnswer.Call(toolUseId(input), tool.name(),
        java.util.Map.of(tool.params().get(0).name(), ChatText.render(List.of(input), space)));
  }

  /** The {@code tool_use} id (and its result's {@code tool_use_id}), from the input's seed. */
  public static String toolUseId(Segment input) {
    return String.format(Locale.ROOT, "toolu_01%016x", input.seed());
  }

  /**
   * The attribution block Claude Code puts first in {@code system}: its {@code cch} differs on every request (here a
   * hash of the workload seed and the request), so a router keying on it would find no prefix at all.
   */
  public static String billingHeader(long seed, WorkloadRequest r) {
    return String.format(Locale.ROOT, "x-anthropic-billing-header: cc_version=2.0.50.e3a; cc_entrypoint=cli; cch=%05x;",
        Rng.derive(seed, 0x434348, r.id().hashCode(), r.index()) & 0xFFFFF);
  }
}
