package dev.kvrouter.examples.report;

/** One worker's queue at one instant: {@code vllm:num_requests_running} and {@code vllm:num_requests_waiting}. */
public record LoadSample(long atMicros, String worker, double running, double waiting) {}
