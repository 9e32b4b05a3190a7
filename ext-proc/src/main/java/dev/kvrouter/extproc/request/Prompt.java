package dev.kvrouter.extproc.request;

/** The prompt of a request: a chat conversation or completions prompts. */
public sealed interface Prompt permits ChatPrompt, CompletionPrompt {}
