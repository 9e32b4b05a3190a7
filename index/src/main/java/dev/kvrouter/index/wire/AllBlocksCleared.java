package dev.kvrouter.index.wire;

/** The engine dropped its whole prefix cache ({@code reset_prefix_cache}); the worker's view must be emptied. */
public record AllBlocksCleared() implements KvEvent {

  /** The only value; the event has no fields. */
  public static final AllBlocksCleared INSTANCE = new AllBlocksCleared();

  public static final String TAG = "AllBlocksCleared";

  @Override
  public String tag() {
    return TAG;
  }
}
