package dev.kvrouter.examples.sim.replay;

import dev.kvrouter.examples.sim.clock.VirtualClock;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.engine.EngineStats;
import dev.kvrouter.examples.sim.engine.OutputTokens;
import dev.kvrouter.examples.sim.engine.RequestObserver;
import dev.kvrouter.examples.sim.engine.RequestSpec;
import dev.kvrouter.examples.sim.engine.SimEngine;
import dev.kvrouter.examples.sim.events.EventFaults;
import dev.kvrouter.examples.sim.events.InProcessKvEventSink;
import dev.kvrouter.examples.sim.events.SequencedKvEventBatch;
import dev.kvrouter.examples.sim.timing.TimingModel;
import dev.kvrouter.index.wire.WireLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Simulated workers in virtual time: the same {@link SimEngine} as a real worker, on one discrete-event
 * {@link VirtualClock}, each publishing its KV events through an {@link InProcessKvEventSink}. A replay
 * schedules arrivals on the clock, picks a worker (the router under test) and submits; the clock then runs a
 * whole trace in seconds.
 *
 * <p>Single-threaded: everything, the subscriber included, runs on the thread that runs the clock.
 */
public final class VirtualFleet {

  /** Receives one worker's event batches, as a subscriber of that worker's publisher would. */
  @FunctionalInterface
  public interface EventSubscriber {
    void onBatch(int worker, SequencedKvEventBatch batch);
  }

  private final VirtualClock clock;
  private final List<SimEngine> engines = new ArrayList<>();
  private final List<InProcessKvEventSink> sinks = new ArrayList<>();

  /**
   * @param names worker names
   * @param configs engine arguments per worker (seeds should differ, as real processes' do)
   * @param timing the step-time model
   * @param outputs the simulated model's output tokens
   * @param layout wire layout to round-trip events through, or {@code null} to pass records
   * @param replayBufferSteps batches each worker keeps for {@link #replay}, 0 for none
   * @param subscriber receives every worker's events
   * @param faultSeed seed of the event-fault randomness
   */
  public VirtualFleet(VirtualClock clock, List<String> names, List<EngineConfig> configs, TimingModel timing,
      OutputTokens outputs, WireLayout layout, int replayBufferSteps, EventSubscriber subscriber,
      long faultSeed) {
    this.clock = Objects.requireNonNull(clock, "clock");
    if (names.size() != configs.size()) {
      throw new IllegalArgumentException("one name per engine config");
    }
    for (int i = 0; i < configs.size(); i++) {
      int worker = i;
      InProcessKvEventSink sink = new InProcessKvEventSink(clock, faultSeed + i, layout, replayBufferSteps,
          b -> subscriber.onBatch(worker, b));
      sinks.add(sink);
      engines.add(new SimEngine(names.get(i), configs.get(i), clock, timing, sink, outputs));
    }
  }

  public VirtualClock clock() {
    return clock;
  }

  public int size() {
    return engines.size();
  }

  public SimEngine engine(int i) {
    return engines.get(i);
  }

  /** Submits on the clock's thread (from inside a clock task). */
  public void submit(int worker, RequestSpec spec, RequestObserver observer) {
    engines.get(worker).submitNow(spec, observer);
  }

  /** Sets the event faults of one worker (from the clock's thread). */
  public void setEventFaults(int worker, EventFaults faults) {
    sinks.get(worker).setFaults(faults);
  }

  /** A replay request to one worker's publisher (from the clock's thread); see {@link InProcessKvEventSink}. */
  public List<SequencedKvEventBatch> replay(int worker, long fromSeq) {
    return sinks.get(worker).replay(fromSeq);
  }

  /** Every worker's counters, taken on the clock's thread. */
  public List<EngineStats> stats() {
    List<EngineStats> out = new ArrayList<>();
    for (SimEngine e : engines) {
      out.add(e.statsNow());
    }
    return out;
  }
}
