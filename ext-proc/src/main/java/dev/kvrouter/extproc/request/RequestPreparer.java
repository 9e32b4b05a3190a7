package dev.kvrouter.extproc.request;

import dev.kvrouter.extproc.model.InlineSystemMode;
import dev.kvrouter.extproc.model.MessagesDialect;
import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.model.ModelResources;
import dev.kvrouter.extproc.model.ModelResolution;
import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import dev.kvrouter.extproc.request.RequestBodyParser.BadRequest;
import dev.kvrouter.extproc.tenancy.TenantIsolation;
import dev.kvrouter.index.block.CacheNamespace;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.function.LongSupplier;

/**
 * The front of the request path: parses a body, resolves its model in the registry and derives its cache
 * namespace from the trusted tenant and the client's salt. Stateless apart from its collaborators; called
 * concurrently from every ext_proc stream.
 */
public final class RequestPreparer {

  private final RequestBodyParser parser;
  private final ModelRegistry models;
  private final TenantIsolation tenancy;
  private final LongSupplier nanoTime;

  public RequestPreparer(ModelRegistry models, TenantIsolation tenancy, LongSupplier nanoTime) {
    this(models, tenancy, nanoTime, RequestBodyParser.DEFAULT_MAX_STOP_STRINGS);
  }

  /** @param maxStopStrings the workers' {@code VLLM_MAX_STOP_STRINGS} ({@code limits.max_stop_strings}) */
  public RequestPreparer(ModelRegistry models, TenantIsolation tenancy, LongSupplier nanoTime, int maxStopStrings) {
    this.parser = new RequestBodyParser(maxStopStrings);
    this.models = models;
    this.tenancy = tenancy;
    this.nanoTime = nanoTime;
  }

  /**
   * No configured models, isolated tenants with the public key: the skeleton's behaviour, for tests and for
   * servers built without a preparer. One shared instance.
   */
  public static RequestPreparer defaults() {
    return Defaults.INSTANCE;
  }

  private static final class Defaults {
    static final RequestPreparer INSTANCE = new RequestPreparer(ModelRegistry.empty(new SimpleMeterRegistry()),
        TenantIsolation.defaults(), System::nanoTime);
  }

  /** What the model's probes found, with the configured placement of inline system messages over the probe's. */
  private static MessagesDialect messagesDialect(ModelResolution model) {
    MessagesDialect probed = model.resources(ModelResources.class).map(ModelResources::messagesDialect)
        .orElse(MessagesDialect.DEFAULT);
    InlineSystemMode configured = model.spec() == null ? null : model.spec().inlineSystemOverride();
    return configured == null ? probed : probed.withInlineSystem(configured);
  }

  /**
   * One request's model, resolved once: a Messages body needs it while it is parsed (its dialect) and every body
   * after (its namespace). Resolving twice counted a fallback twice and could read two states of a loading model.
   */
  private final class ResolvedOnce {
    private ModelResolution model;

    MessagesDialect dialect(String name) {
      return messagesDialect(model(name));
    }

    ModelResolution model(String name) {
      if (model == null || !model.requested().equals(name)) {
        model = models.resolve(name);
      }
      return model;
    }
  }

  /**
   * @param tenant the trusted tenant header value, or null
   * @throws BadRequest for a body the engine would reject, or one whose salt cannot be rewritten
   */
  public PreparedRequest prepare(Kind kind, byte[] body, int length, String tenant) throws BadRequest {
    long start = nanoTime.getAsLong();
    ResolvedOnce once = new ResolvedOnce();
    InferenceRequest request = parser.parse(kind, body, length, once::dialect);
    ModelResolution model = once.model(request.model());
    String salt = tenancy.effectiveSalt(model.shareAcrossTenants(), tenant, request.cacheSalt());
    if (salt != null && !salt.equals(request.cacheSalt()) && !request.saltSites().known()) {
      // Jackson reports no byte offsets for UTF-16/32 bodies; refusing beats forwarding an unsalted body.
      throw RequestBodyParser.bad("request body must be UTF-8 encoded", null);
    }
    RequestScope scope = new RequestScope(model, new CacheNamespace(model.baseModel(), model.adapter(), salt),
        tenancy.tenantHash(tenant));
    return new PreparedRequest(request, scope, nanoTime.getAsLong() - start);
  }
}
