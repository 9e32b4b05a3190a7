package dev.kvrouter.extproc.model;

/**
 * How a model's workers turn an Anthropic Messages request into a chat prompt where vLLM decides it per chat
 * template, by probing the template once.
 *
 * @param inlineSystem where inline system messages go
 * @param disabledThinkingEffort the {@code reasoning_effort} sent for {@code thinking: {"type": "disabled"}}: "none",
 *     or "low" where the template refuses or ignores "none"
 */
public record MessagesDialect(InlineSystemMode inlineSystem, String disabledThinkingEffort) {

  /** What vLLM's probes answer for a template that marks system turns and honours "none". */
  public static final MessagesDialect DEFAULT = new MessagesDialect(InlineSystemMode.PRESERVE, "none");

  public MessagesDialect withInlineSystem(InlineSystemMode mode) {
    return new MessagesDialect(mode, disabledThinkingEffort);
  }
}
