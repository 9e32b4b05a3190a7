package dev.kvrouter.examples.sim.testing;

import dev.kvrouter.examples.sim.events.KvEventSink;
import dev.kvrouter.index.wire.EventBatch;
import dev.kvrouter.index.wire.KvEvent;
import java.util.ArrayList;
import java.util.List;

/** A test double that records published batches and lifecycle calls. */
public final class RecordingSink implements KvEventSink {

  public final List<EventBatch> batches = new ArrayList<>();
  public final List<String> lifecycle = new ArrayList<>();

  @Override
  public synchronized void publish(EventBatch batch) {
    batches.add(batch);
  }

  @Override
  public synchronized void crashed() {
    lifecycle.add("crashed");
  }

  @Override
  public synchronized void restart() {
    lifecycle.add("restart");
  }

  public synchronized List<KvEvent> events() {
    List<KvEvent> out = new ArrayList<>();
    for (EventBatch b : batches) {
      out.addAll(b.events());
    }
    return out;
  }

  public synchronized <T extends KvEvent> List<T> events(Class<T> type) {
    List<T> out = new ArrayList<>();
    for (KvEvent e : events()) {
      if (type.isInstance(e)) {
        out.add(type.cast(e));
      }
    }
    return out;
  }
}
