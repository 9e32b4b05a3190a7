package dev.kvrouter.bench.index;

import dev.kvrouter.index.WorkerView;
import dev.kvrouter.index.events.EventPlaneHealth;
import dev.kvrouter.index.events.WorkerEventHealth;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Duration;

/** Health objects for benchmarks (the applier counts into one). */
final class BenchHealth {

  private static final EventPlaneHealth HEALTH =
      new EventPlaneHealth(new SimpleMeterRegistry(), Clock.systemUTC(), Duration.ZERO);

  private BenchHealth() {}

  static WorkerEventHealth of(WorkerView view) {
    return HEALTH.register(view);
  }
}
