package dev.kvrouter.extproc.request;

import dev.kvrouter.extproc.model.ModelResolution;
import dev.kvrouter.index.block.CacheNamespace;
import java.util.Objects;

/**
 * Who a request belongs to and which cache it may use: its model as the registry resolved it, its cache namespace
 * (base model, LoRA adapter, effective salt) and its tenant's pseudonym.
 *
 * @param model the registry's view of the requested model
 * @param namespace the namespace its blocks hash in; its {@code cacheSalt} is what the engine must receive
 * @param tenantHash pseudonym of the trusted tenant, or null; the tenant value itself is never kept
 */
public record RequestScope(ModelResolution model, CacheNamespace namespace, String tenantHash) {

  public RequestScope {
    Objects.requireNonNull(model, "model");
    Objects.requireNonNull(namespace, "namespace");
  }

  /** Why the request cannot use its model's pipeline (for example {@code unknown_model}), or null. */
  public String fallback() {
    return model.fallback();
  }

  /** The salt the engine must see, or null for the shared namespace. */
  public String effectiveSalt() {
    return namespace.cacheSalt();
  }
}
