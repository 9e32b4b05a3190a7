package dev.kvrouter.index.block;

import java.util.Objects;

/**
 * Everything besides the token ids that decides whether two blocks are the same KV cache entry.
 *
 * <p>Two requests can share cached blocks only if model, LoRA adapter and cache salt all match. The tenant is
 * not a separate field on purpose: tenant isolation is enforced by giving each tenant its own effective
 * {@code cache_salt} (see {@code TenantIsolation} in ext-proc), which the router writes into the request so
 * the engine partitions its cache the same way, and which comes back in the engine's {@code BlockStored}
 * events. The event path and the request path therefore derive the very same namespace.
 *
 * @param model the base model name as the registry knows it (never the adapter name)
 * @param adapter the LoRA adapter name, or {@code null} for the base model
 * @param cacheSalt the effective cache salt, or {@code null} for the shared namespace
 */
public record CacheNamespace(String model, String adapter, String cacheSalt) {

  public CacheNamespace {
    Objects.requireNonNull(model, "model");
    if (adapter != null && adapter.isEmpty()) {
      adapter = null;
    }
    if (cacheSalt != null && cacheSalt.isEmpty()) {
      cacheSalt = null;
    }
  }

  public static CacheNamespace of(String model) {
    return new CacheNamespace(model, null, null);
  }

  /** The chain root of this namespace: the value {@link BlockHasher} uses as the parent of block 0. */
  public long rootSeed() {
    return BlockHasher.rootSeed(this);
  }
}
