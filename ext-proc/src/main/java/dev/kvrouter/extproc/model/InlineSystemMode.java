package dev.kvrouter.extproc.model;

/**
 * Where a model's Anthropic Messages requests put inline {@code role: "system"} messages, as vLLM decides per chat
 * template: kept in place when the template renders them as system turns of their own, otherwise folded into a
 * neighbouring user message. Clients such as Claude Code append one on almost every turn, so the router must place
 * them as the engine does or its prompt diverges from the engine's at the first one.
 */
public enum InlineSystemMode {
  PRESERVE,
  FOLD,
  /**
   * vLLM releases before the template probe: every system message, the top-level {@code system} and inline ones alike,
   * joined without a separator into one leading system message. Never probed; configured per model.
   */
  MERGE
}
