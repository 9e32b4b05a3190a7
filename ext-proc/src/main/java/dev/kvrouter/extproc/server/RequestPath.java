package dev.kvrouter.extproc.server;

import dev.kvrouter.extproc.pipeline.PromptPipeline;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.routing.Router;
import java.util.Objects;

/**
 * The collaborators every request stream shares, in the order a request meets them: the preparer (parse,
 * model, tenant namespace), the prompt pipeline (template, tokens, block hashes; null to route without
 * prompts), the router, and the listener that follows each routed request to its end.
 */
public record RequestPath(RequestPreparer preparer, PromptPipeline pipeline, Router router, RequestListener listener) {

  public RequestPath {
    Objects.requireNonNull(preparer, "preparer");
    Objects.requireNonNull(router, "router");
    listener = listener == null ? RequestListener.NONE : listener;
  }

  /** No model registry, no pipeline: bodies are parsed and routed by load (the skeleton, and unit tests). */
  public static RequestPath of(Router router, RequestListener listener) {
    return new RequestPath(RequestPreparer.defaults(), null, router, listener);
  }
}
