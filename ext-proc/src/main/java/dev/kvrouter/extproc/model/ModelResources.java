package dev.kvrouter.extproc.model;

/**
 * What the request path loads once per model and shares across requests: its chat-template renderer and
 * tokenizer. The pipeline that turns a request into block hashes implements this with its own type (template
 * and tokenizer together) through a {@link ModelResourcesLoader}, and gets it back with
 * {@link ModelResolution#resources(Class)}.
 *
 * <p>Implementations are used by many request threads at once and must be thread-safe.
 */
public interface ModelResources extends AutoCloseable {

  /** How this model's chat template renders a Messages request where vLLM probes the template to decide. */
  default MessagesDialect messagesDialect() {
    return MessagesDialect.DEFAULT;
  }

  /** Releases native or cached memory when the registry drops this instance. Never throws. */
  @Override
  default void close() {}
}
