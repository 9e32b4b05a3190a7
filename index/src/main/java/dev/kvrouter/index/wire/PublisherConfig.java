package dev.kvrouter.index.wire;

import java.time.Clock;
import java.util.Objects;

/**
 * Settings of a {@link KvEventPublisher}, with vLLM's defaults.
 *
 * @param endpoint PUB endpoint; {@code tcp://127.0.0.1:*} binds an ephemeral port (see
 *     {@link KvEventPublisher#endpoint()})
 * @param bind whether the PUB binds (engine default) or connects to a binding subscriber (llm-d style)
 * @param replayEndpoint ROUTER endpoint for replay (always binds), or {@code null} for no replay
 * @param topic the first frame of every message ({@code ""} by default)
 * @param layout event layout
 * @param hashEncoding block hash form on the wire
 * @param replayLayout reply shape of the replay socket
 * @param bufferSteps batches kept for replay (vLLM {@code buffer_steps}, default 10 000)
 * @param hwm PUB send high-water mark (default 100 000)
 * @param maxQueueSize batches queued before {@link KvEventPublisher#publish} blocks (default 100 000)
 * @param dataParallelRank rank written into batches that carry none, or {@code null}
 * @param clock source of the batch timestamp
 */
public record PublisherConfig(
    String endpoint,
    boolean bind,
    String replayEndpoint,
    String topic,
    WireLayout layout,
    HashEncoding hashEncoding,
    ReplayLayout replayLayout,
    int bufferSteps,
    int hwm,
    int maxQueueSize,
    Integer dataParallelRank,
    Clock clock) {

  public PublisherConfig {
    Objects.requireNonNull(endpoint, "endpoint");
    Objects.requireNonNull(topic, "topic");
    Objects.requireNonNull(layout, "layout");
    Objects.requireNonNull(hashEncoding, "hashEncoding");
    Objects.requireNonNull(replayLayout, "replayLayout");
    Objects.requireNonNull(clock, "clock");
    if (bufferSteps < 1 || hwm < 0 || maxQueueSize < 1) {
      throw new IllegalArgumentException("bufferSteps and maxQueueSize must be >= 1 and hwm >= 0");
    }
  }

  /** vLLM 0.26 defaults on {@code endpoint}: map events, uint64 hashes, topic-framed replay, no replay socket. */
  public static PublisherConfig vllm(String endpoint) {
    return new PublisherConfig(endpoint, ZmqFrames.engineBinds(endpoint),
        null, "", WireLayout.VLLM_MAP, HashEncoding.UNSIGNED, ReplayLayout.WITH_TOPIC, 10_000, 100_000, 100_000,
        null, Clock.systemUTC());
  }

  public PublisherConfig withBind(boolean b) {
    return new PublisherConfig(endpoint, b, replayEndpoint, topic, layout, hashEncoding, replayLayout, bufferSteps,
        hwm, maxQueueSize, dataParallelRank, clock);
  }

  public PublisherConfig withReplay(String replay, ReplayLayout replyLayout) {
    return new PublisherConfig(endpoint, bind, replay, topic, layout, hashEncoding, replyLayout, bufferSteps, hwm,
        maxQueueSize, dataParallelRank, clock);
  }

  public PublisherConfig withTopic(String t) {
    return new PublisherConfig(endpoint, bind, replayEndpoint, t, layout, hashEncoding, replayLayout, bufferSteps,
        hwm, maxQueueSize, dataParallelRank, clock);
  }

  public PublisherConfig withLayout(WireLayout l, HashEncoding h) {
    return new PublisherConfig(endpoint, bind, replayEndpoint, topic, l, h, replayLayout, bufferSteps, hwm,
        maxQueueSize, dataParallelRank, clock);
  }

  public PublisherConfig withBufferSteps(int steps) {
    return new PublisherConfig(endpoint, bind, replayEndpoint, topic, layout, hashEncoding, replayLayout, steps, hwm,
        maxQueueSize, dataParallelRank, clock);
  }

  public PublisherConfig withDataParallelRank(Integer rank) {
    return new PublisherConfig(endpoint, bind, replayEndpoint, topic, layout, hashEncoding, replayLayout, bufferSteps,
        hwm, maxQueueSize, rank, clock);
  }

  public PublisherConfig withClock(Clock c) {
    return new PublisherConfig(endpoint, bind, replayEndpoint, topic, layout, hashEncoding, replayLayout, bufferSteps,
        hwm, maxQueueSize, dataParallelRank, c);
  }

  public PublisherConfig withQueue(int maxQueue, int highWaterMark) {
    return new PublisherConfig(endpoint, bind, replayEndpoint, topic, layout, hashEncoding, replayLayout, bufferSteps,
        highWaterMark, maxQueue, dataParallelRank, clock);
  }
}
