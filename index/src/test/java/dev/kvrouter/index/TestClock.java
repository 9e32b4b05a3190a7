package dev.kvrouter.index;

import java.time.Clock;
import java.time.Instant;
import java.time.ZoneId;

/** A clock tests move by hand. */
public final class TestClock extends Clock {

  private volatile long millis;

  public TestClock() {
    this(1_000_000);
  }

  public TestClock(long millis) {
    this.millis = millis;
  }

  public void advance(long ms) {
    millis += ms;
  }

  public void set(long ms) {
    millis = ms;
  }

  @Override
  public ZoneId getZone() {
    return ZoneId.of("UTC");
  }

  @Override
  public Clock withZone(ZoneId zone) {
    return this;
  }

  @Override
  public Instant instant() {
    return Instant.ofEpochMilli(millis);
  }

  @Override
  public long millis() {
    return millis;
  }
}
