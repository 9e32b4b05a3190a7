package dev.kvrouter.extproc.routing;

import java.util.List;
import java.util.random.RandomGenerator;

/**
 * What a policy decides on: the eligible candidates of one request with their cost terms filled in.
 *
 * @param request the request
 * @param candidates eligible candidates, non-empty, in fleet order, each {@link Candidate#scored()}
 * @param weights the effective weights (configuration, model, request override)
 * @param shape the request's size in blocks
 * @param hasPrompt whether the request path provided block hashes (false: overlaps are unknown, load only)
 * @param rng randomness for tie-breaks and sampling (seeded in tests)
 */
public record Scoring(
    RouteRequest request,
    List<Candidate> candidates,
    Weights weights,
    RequestShape shape,
    boolean hasPrompt,
    RandomGenerator rng) {}
