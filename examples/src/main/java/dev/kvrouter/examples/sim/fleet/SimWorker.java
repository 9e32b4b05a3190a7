package dev.kvrouter.examples.sim.fleet;

import dev.kvrouter.examples.sim.clock.RealTimeClock;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.engine.OutputTokens;
import dev.kvrouter.examples.sim.engine.SimEngine;
import dev.kvrouter.examples.sim.events.EventFaults;
import dev.kvrouter.examples.sim.events.KvEventSink;
import dev.kvrouter.examples.sim.events.ZmqKvEventSink;
import dev.kvrouter.examples.sim.http.FaultControl;
import dev.kvrouter.examples.sim.http.PromptEncoder;
import dev.kvrouter.examples.sim.http.ScriptedChatAnswers;
import dev.kvrouter.examples.sim.http.ScriptedOutput;
import dev.kvrouter.examples.sim.http.SimHttpServer;
import dev.kvrouter.examples.sim.timing.TimingModel;
import dev.kvrouter.index.wire.HashEncoding;
import dev.kvrouter.index.wire.PublisherConfig;
import dev.kvrouter.index.wire.ReplayLayout;
import dev.kvrouter.index.wire.WireLayout;
import dev.kvrouter.xds.registry.Worker;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.Executor;

/**
 * One simulated vLLM worker running in real time: an engine on its own clock thread, its KV events on a real
 * ZMQ publisher (or none), and its OpenAI HTTP server. Several live in one JVM; each is independent (own
 * engine thread, own sockets, own fault state) and shares only the response-writer executor.
 */
public final class SimWorker implements FaultControl, AutoCloseable {

  /**
   * What to start.
   *
   * @param name worker name (registry name, {@code x-kvrouter-served-by})
   * @param engine engine arguments
   * @param timing step-time model
   * @param gpuMemoryUtilization reported in {@code vllm:cache_config_info}, or {@code null}
   * @param bind listen address of HTTP and events
   * @param httpPort HTTP port (0 = ephemeral)
   * @param events event publisher settings, or {@code null} for a worker that publishes no events
   * @param faults initial fault settings
   * @param scriptedOutput a request's {@code seed} names its output tokens ({@link ScriptedOutput}; for a chat
   *     request, the scripted chat answer {@link ScriptedChatAnswers}), or {@code null} for the default readable
   *     output
   */
  public record Spec(String name, EngineConfig engine, TimingModel timing, Double gpuMemoryUtilization,
      String bind, int httpPort, Events events, FaultControl.Update faults, ScriptedOutput scriptedOutput) {

    public Spec {
      Objects.requireNonNull(name, "name");
      Objects.requireNonNull(engine, "engine");
      Objects.requireNonNull(timing, "timing");
      Objects.requireNonNull(bind, "bind");
      faults = faults == null ? FaultControl.Update.NONE : faults;
    }
  }

  /**
   * KV event publishing, as vLLM's {@code --kv-events-config}.
   *
   * @param port PUB port (0 = ephemeral); the engine binds it
   * @param replayPort ROUTER replay port, 0 = ephemeral, -1 = no replay
   * @param topic topic frame ({@code ""} is vLLM's default)
   * @param layout event layout of the engine release being imitated
   */
  public record Events(int port, int replayPort, String topic, WireLayout layout) {
    public Events {
      topic = topic == null ? "" : topic;
      layout = layout == null ? WireLayout.VLLM_MAP : layout;
    }
  }

  private final Spec spec;
  private final RealTimeClock clock;
  private final KvEventSink sink;
  private final ZmqKvEventSink zmq;
  private final SimEngine engine;
  private final SimHttpServer http;
  private volatile EventFaults eventFaults = EventFaults.NONE;
  private volatile double slowdown = 1.0;

  private SimWorker(Spec spec, PromptEncoder encoder, Executor writer) throws IOException {
    this.spec = spec;
    this.clock = RealTimeClock.withOwnThread("sim-engine-" + spec.name());
    try {
      if (spec.events() != null) {
        Events e = spec.events();
        String endpoint = "tcp://" + spec.bind() + ":" + (e.port() == 0 ? "*" : Integer.toString(e.port()));
        PublisherConfig pc = PublisherConfig.vllm(endpoint).withBind(true).withTopic(e.topic())
            .withLayout(e.layout(), HashEncoding.UNSIGNED)
            .withDataParallelRank(spec.engine().dpRank());
        if (e.replayPort() >= 0) {
          String replay = "tcp://" + spec.bind() + ":" + (e.replayPort() == 0 ? "*" : Integer.toString(e.replayPort()));
          pc = pc.withReplay(replay, e.layout() == WireLayout.SGLANG_ARRAY ? ReplayLayout.WITHOUT_TOPIC
              : ReplayLayout.WITH_TOPIC);
        }
        this.zmq = ZmqKvEventSink.start(pc, "sim-events-" + spec.name(), spec.engine().seed() ^ 0x5EED);
        this.sink = zmq;
      } else {
        this.zmq = null;
        this.sink = KvEventSink.discarding();
      }
      ScriptedOutput scripted = spec.scriptedOutput();
      // seeded chat requests generate scripted chat answers; the engine reads their scripts by output seed
      ScriptedChatAnswers chatAnswers = scripted == null ? null : ScriptedChatAnswers.of(scripted, encoder);
      OutputTokens outputs = scripted == null ? OutputTokens.cycling(encoder.outputVocabulary())
          : chatAnswers == null ? scripted.tokens() : chatAnswers.over(scripted.tokens());
      this.engine = new SimEngine(spec.name(), spec.engine(), clock, spec.timing(), sink, outputs);
      this.http = new SimHttpServer(spec.name(), engine, encoder, this, writer,
          new SimHttpServer.Options(spec.bind(), spec.httpPort(), 64 << 20, 4), spec.gpuMemoryUtilization(),
          scripted, chatAnswers);
      http.start();
      apply(spec.faults());
    } catch (IOException | RuntimeException e) {
      close();
      throw e;
    }
  }

  /** Starts a worker; the writer executor is shared by every worker of a fleet. */
  public static SimWorker start(Spec spec, PromptEncoder encoder, Executor writer) throws IOException {
    return new SimWorker(spec, encoder, writer);
  }

  public String name() {
    return spec.name();
  }

  public int httpPort() {
    return http.port();
  }

  public SimEngine engine() {
    return engine;
  }

  /** The bound PUB endpoint, or {@code null} without events. */
  public String eventsEndpoint() {
    return zmq == null ? null : zmq.endpoint();
  }

  /** The bound replay endpoint, or {@code null}. */
  public String replayEndpoint() {
    return zmq == null ? null : zmq.replayEndpoint();
  }

  /** This worker as the router's registry describes it (the entry written to {@code workers.yaml}). */
  public Worker registryEntry(Map<String, String> extraLabels) {
    Worker.EventEndpoint ev = zmq == null ? null
        : new Worker.EventEndpoint(zmq.endpoint(), zmq.replayEndpoint(), spec.events().topic(), false);
    Map<String, String> labels = new LinkedHashMap<>();
    labels.put("simulated", "true");
    if (extraLabels != null) {
      labels.putAll(extraLabels);
    }
    return new Worker(spec.name(), spec.bind(), http.port(), spec.engine().model(), spec.engine().adapters(),
        Worker.Role.BOTH, ev, 1, spec.engine().blockSize(), 1, null, false, labels);
  }

  @Override
  public State state() {
    return new State(eventFaults, slowdown, engine.isUp());
  }

  @Override
  public synchronized State apply(Update u) {
    EventFaults cur = eventFaults;
    EventFaults next = new EventFaults(
        u.dropRate() != null ? u.dropRate() : cur.dropRate(),
        u.delayMillis() != null ? u.delayMillis() : cur.delayMillis(),
        u.reorderRate() != null ? u.reorderRate() : cur.reorderRate(),
        u.stopPublishing() != null ? u.stopPublishing() : cur.stopped());
    if (u.slowdown() != null && (!(u.slowdown() > 0) || u.slowdown() > 1000)) {
      throw new IllegalArgumentException("slowdown must be in (0, 1000]");
    }
    if (u.crashDownMillis() != null && (u.crashDownMillis() < 0 || u.crashDownMillis() > 3_600_000)) {
      throw new IllegalArgumentException("crash_down_ms must be in [0, 3600000]");
    }
    if (!next.equals(cur)) {
      if (zmq == null && !next.equals(EventFaults.NONE)) {
        throw new IllegalArgumentException("worker " + spec.name() + " publishes no events");
      }
      eventFaults = next;
      clock.execute(() -> sink.setFaults(next)); // the sink is owned by the engine thread
    }
    if (u.slowdown() != null) {
      slowdown = u.slowdown();
      engine.setSlowdown(u.slowdown());
    }
    if (u.crashDownMillis() != null) {
      engine.crash(u.crashDownMillis() * 1_000_000L);
    }
    return state();
  }

  /**
   * The whole worker process dies, as a vLLM whose engine died exits: in-flight requests fail, the HTTP port refuses
   * connections ({@code /metrics} and {@code /health} too), the cache and the event publisher are gone; after
   * {@code downNanos} a new process listens on the same port with an empty cache. {@code crash_down_ms} of the
   * fault API crashes the engine only and keeps the HTTP server answering 503.
   */
  public void kill(long downNanos) {
    if (downNanos < 0) {
      throw new IllegalArgumentException("downNanos must be >= 0");
    }
    engine.crash(downNanos);
    http.suspend();
    clock.schedule(clock.nanoTime() + downNanos, () -> {
      try {
        http.resume();
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException("worker " + spec.name() + " could not listen again", e);
      }
    });
  }

  @Override
  public void close() {
    if (http != null) {
      http.close();
    }
    clock.close();
    if (sink != null) {
      sink.close();
    }
  }
}
