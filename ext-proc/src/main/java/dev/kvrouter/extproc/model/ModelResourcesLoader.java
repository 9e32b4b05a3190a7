package dev.kvrouter.extproc.model;

/**
 * Builds a model's {@link ModelResources} from its checked files. Called at most once at a time per model, on the
 * registry's loader executor, never on a request thread; a throw becomes a {@code model_load_failed} fallback
 * for that model's requests (retried after a back-off), never a failed request.
 */
@FunctionalInterface
public interface ModelResourcesLoader {

  /** A loader for builds without a tokenization pipeline: every model gets an empty resource set. */
  ModelResourcesLoader NONE = (spec, files) -> new ModelResources() {};

  ModelResources load(ModelSpec spec, ModelFiles files) throws Exception;
}
