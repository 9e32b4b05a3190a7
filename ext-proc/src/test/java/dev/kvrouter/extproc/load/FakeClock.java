package dev.kvrouter.extproc.load;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/** A monotonic nanosecond clock the test moves by hand. */
public final class FakeClock implements LongSupplier {

  private final AtomicLong nanos = new AtomicLong(1_000_000_000L);

  @Override
  public long getAsLong() {
    return nanos.get();
  }

  public void advance(long amount, TimeUnit unit) {
    nanos.addAndGet(unit.toNanos(amount));
  }
}
