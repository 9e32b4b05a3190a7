package dev.kvrouter.extproc.server;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The bytes of request bodies every stream holds at once, against one cap ({@code limits.max_buffered_body_bytes}).
 * {@code limits.max_body_bytes} bounds one body; without this, a thousand slow uploads in FULL_DUPLEX_STREAMED mode
 * (Envoy sets no timeout on them) or a burst of large ones would hold a thousand times that.
 */
public final class BodyBudget {

  /** No cap: tests and tools that build streams one by one. */
  public static final BodyBudget UNLIMITED = new BodyBudget(Long.MAX_VALUE);

  private final long capacity;
  private final AtomicLong used = new AtomicLong();

  public BodyBudget(long capacity) {
    if (capacity < 1) {
      throw new IllegalArgumentException("capacity must be >= 1, was " + capacity);
    }
    this.capacity = capacity;
  }

  /** Takes {@code n} bytes if they fit under the cap. */
  boolean tryReserve(long n) {
    long u;
    do {
      u = used.get();
      if (n > capacity - u) {
        return false;
      }
    } while (!used.compareAndSet(u, u + n));
    return true;
  }

  void release(long n) {
    used.addAndGet(-n);
  }

  /** Bytes held now. */
  public long used() {
    return used.get();
  }

  public long capacity() {
    return capacity;
  }
}
