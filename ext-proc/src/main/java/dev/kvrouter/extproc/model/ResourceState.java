package dev.kvrouter.extproc.model;

/** Where a model's {@link ModelResources} stand; every state but {@link Ready} routes by load with a reason. */
public sealed interface ResourceState {

  /** The fallback reason for requests that see this state, or null when ready. */
  String fallback();

  /** Loaded and usable. */
  record Ready(ModelResources resources) implements ResourceState {
    @Override
    public String fallback() {
      return null;
    }
  }

  /** Being loaded (first use, or a retry after a failure). */
  record Loading() implements ResourceState {
    @Override
    public String fallback() {
      return "model_loading";
    }
  }

  /** The last load failed; retried after a back-off. {@code detail} is for logs and status, not for clients. */
  record Failed(String detail, long retryAtNanos) implements ResourceState {
    @Override
    public String fallback() {
      return "model_load_failed";
    }
  }

  /** The model is configured without a tokenizer. */
  record NotConfigured() implements ResourceState {
    @Override
    public String fallback() {
      return "no_tokenizer";
    }
  }

  /** The model is not in the registry at all. */
  record Unknown() implements ResourceState {
    @Override
    public String fallback() {
      return "unknown_model";
    }
  }
}
