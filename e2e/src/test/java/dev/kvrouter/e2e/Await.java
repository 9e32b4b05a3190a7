package dev.kvrouter.e2e;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/** Bounded polling for state that another process or thread reaches later (events applied, responses observed). */
final class Await {

  private Await() {}

  /** Polls {@code condition} every 20 ms until it holds; fails with {@code what} after {@code timeout}. */
  static void until(String what, Duration timeout, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError("timed out after " + timeout + " waiting until " + what);
      }
      Thread.sleep(20);
    }
  }
}
