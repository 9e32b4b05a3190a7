package dev.kvrouter.extproc.model;

import java.util.Optional;

/**
 * What the registry knows about a requested model name.
 *
 * @param requested the name in the request
 * @param baseModel the base model (the requested name itself when it is not a known adapter, including unknown
 *     models)
 * @param adapter the LoRA adapter name when the request names an adapter, else null
 * @param spec the configuration entry of the base model, or null for an unknown model
 * @param blockSize KV block size of the model
 * @param shareAcrossTenants the model's tenancy override, or null for the global rule
 * @param resources the model's template and tokenizer, or why they are not usable
 */
public record ModelResolution(
    String requested,
    String baseModel,
    String adapter,
    ModelSpec spec,
    int blockSize,
    Boolean shareAcrossTenants,
    ResourceState resources) {

  /** False for a model the registry does not list. */
  public boolean known() {
    return spec != null;
  }

  /** Why this request cannot use the model's pipeline (unknown model, loading, failed), or null when it can. */
  public String fallback() {
    return resources.fallback();
  }

  /** The loaded resources as the pipeline's own type, when ready and of that type. */
  public <T extends ModelResources> Optional<T> resources(Class<T> type) {
    return resources instanceof ResourceState.Ready r && type.isInstance(r.resources())
        ? Optional.of(type.cast(r.resources()))
        : Optional.empty();
  }
}
