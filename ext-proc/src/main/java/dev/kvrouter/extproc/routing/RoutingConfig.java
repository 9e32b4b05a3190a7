package dev.kvrouter.extproc.routing;

import java.util.Map;

/**
 * Everything the router is configured with ({@code routing:} in kvrouter.yaml, resolved by the command).
 *
 * @param defaults settings for models without their own entry
 * @param models per-model settings, by requested model or adapter name, or by base model
 * @param defaultBlockSize block size used when the request path gave none and the worker declares none
 * @param defaultOutputTokens expected output tokens when the request has no {@code max_tokens}
 * @param maxOutputTokens cap on the output tokens a request is expected to produce (its KV reservation)
 */
public record RoutingConfig(
    ModelRouting defaults,
    Map<String, ModelRouting> models,
    int defaultBlockSize,
    int defaultOutputTokens,
    int maxOutputTokens) {

  public RoutingConfig {
    models = models == null ? Map.of() : Map.copyOf(models);
    if (defaultBlockSize <= 0 || defaultOutputTokens < 0 || maxOutputTokens < 0) {
      throw new IllegalArgumentException("block size must be > 0 and output tokens >= 0");
    }
  }

  public static RoutingConfig defaults(String policy) {
    return new RoutingConfig(ModelRouting.defaults(policy), Map.of(), 16, 256, 1024);
  }

  /** Settings for a request naming {@code requested}, served by workers whose base model is {@code base}. */
  public ModelRouting resolve(String requested, String base) {
    ModelRouting m = models.get(requested);
    if (m == null && base != null) {
      m = models.get(base);
    }
    return m == null ? defaults : m;
  }

  /** Output tokens a request with this {@code max_tokens} (-1 = absent) is expected to generate. */
  public int expectedOutputTokens(int maxTokens) {
    return maxTokens > 0 ? Math.min(maxTokens, maxOutputTokens) : Math.min(defaultOutputTokens, maxOutputTokens);
  }
}
