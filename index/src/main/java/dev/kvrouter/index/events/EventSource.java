package dev.kvrouter.index.events;

import dev.kvrouter.index.WorkerId;
import java.util.Objects;

/**
 * One engine event stream to follow: one per worker and data-parallel rank (the wiring offsets the port by the
 * rank, see {@link dev.kvrouter.index.wire.ZmqFrames#offsetEndpoint}).
 *
 * @param id the worker and rank whose view this stream feeds
 * @param model the worker's base model (the namespace root of every block it stores)
 * @param blockSize the block size the router hashes this worker's requests with; stores of another size are
 *     not indexed (their identities could never match a request)
 * @param endpoint the engine's PUB endpoint to connect to, or the local endpoint to bind when {@code bind}
 * @param replayEndpoint the engine's ROUTER replay endpoint, or {@code null} (gaps then mark the view stale)
 * @param topic topic prefix to subscribe to ({@code ""} for all); with {@code bind}, several sources may share
 *     one endpoint and are told apart by their exact topic (llm-d's {@code kv@<pod>@<model>})
 * @param bind whether the router binds and engines connect (llm-d style) instead of connecting to the engine
 * @param notPrefixClosed the engine is known (configured) not to keep its cached blocks prefix-closed, so lookups
 *     read every block of this worker ({@link dev.kvrouter.index.WorkerView#markNotPrefixClosed})
 */
public record EventSource(
    WorkerId id, String model, int blockSize, String endpoint, String replayEndpoint, String topic, boolean bind,
    boolean notPrefixClosed) {

  /** A source whose engine is trusted to keep its blocks prefix-closed until its events show otherwise. */
  public EventSource(
      WorkerId id, String model, int blockSize, String endpoint, String replayEndpoint, String topic, boolean bind) {
    this(id, model, blockSize, endpoint, replayEndpoint, topic, bind, false);
  }

  public EventSource {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(model, "model");
    Objects.requireNonNull(endpoint, "endpoint");
    Objects.requireNonNull(topic, "topic");
    if (blockSize <= 0) {
      throw new IllegalArgumentException("blockSize must be positive for " + id + ", was " + blockSize);
    }
    if (replayEndpoint != null && replayEndpoint.isBlank()) {
      replayEndpoint = null;
    }
  }

  /** The common vLLM deployment: connect to the engine's PUB, no topic filter. */
  public static EventSource connect(WorkerId id, String model, int blockSize, String endpoint, String replay) {
    return new EventSource(id, model, blockSize, endpoint, replay, "", false);
  }
}
