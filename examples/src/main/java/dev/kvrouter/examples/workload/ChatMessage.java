package dev.kvrouter.examples.workload;

/** A rendered chat message, ready for an OpenAI {@code messages} array. */
public record ChatMessage(String role, String content) {}
