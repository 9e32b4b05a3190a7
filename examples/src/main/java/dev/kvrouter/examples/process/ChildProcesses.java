package dev.kvrouter.examples.process;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Processes this JVM started that must not outlive it (Envoy, router JVMs). A SIGTERM of the JVM runs its shutdown
 * hooks but not the {@code close()} of a thread blocked elsewhere ({@code kvrouter demo --keep-running} waits for
 * ever), so without this hook {@code kill <pid>} left Envoy running and holding the demo's ports; Ctrl-C hid it by
 * signalling the whole process group.
 */
public final class ChildProcesses {

  /** How long the children get to stop on SIGTERM (a router drains first) before they are killed. */
  static final Duration GRACE = Duration.ofSeconds(10);

  private static final Set<Process> LIVE = ConcurrentHashMap.newKeySet();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> stop(List.copyOf(LIVE), GRACE), "child-processes-stop"));
  }

  private ChildProcesses() {}

  /** Stops {@code p} when this JVM exits, normally or on SIGTERM, unless {@link #release}d first. */
  public static Process track(Process p) {
    LIVE.add(p);
    return p;
  }

  /** {@code p} was stopped by its owner: the exit hook no longer needs to. */
  public static void release(Process p) {
    LIVE.remove(p);
  }

  /** SIGTERM to every one of {@code children}, then up to {@code grace} for all of them, then SIGKILL. */
  static void stop(List<Process> children, Duration grace) {
    children.forEach(Process::destroy);
    long deadline = System.nanoTime() + grace.toNanos();
    for (Process p : children) {
      try {
        if (!p.waitFor(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
          p.destroyForcibly();
          p.waitFor(5, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        p.destroyForcibly();
      }
    }
  }
}
