package dev.kvrouter.examples.loadgen;

import dev.kvrouter.examples.report.RouterSnapshot;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Predicate;
import java.util.function.Supplier;

/**
 * Router probes for a router running in this JVM, for {@link RunContext.Builder#routerSnapshot}. A router in
 * its own process needs a probe that asks it (its admin endpoint or remote JMX); that is the runner's wiring.
 */
public final class JvmProbes {

  private JvmProbes() {}

  /**
   * This whole process: its CPU time, heap and resident set. When the load generator shares the JVM, its own
   * cost is included; prefer {@link #threads} then.
   */
  public static Supplier<RouterSnapshot> process() {
    return () -> new RouterSnapshot(processCpuNanos(), heapUsed(), rssBytes());
  }

  /**
   * CPU time summed over the live threads whose name {@code matches} (e.g. the router's gRPC and routing
   * threads), with this JVM's heap (shared, so an upper bound) and resident set. Threads that ended during the
   * run take their CPU time with them, so give the router long-lived pools.
   */
  public static Supplier<RouterSnapshot> threads(Predicate<String> matches) {
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    return () -> {
      long cpu = -1;
      if (mx.isThreadCpuTimeSupported() && mx.isThreadCpuTimeEnabled()) {
        cpu = 0;
        for (Thread t : Thread.getAllStackTraces().keySet()) {
          if (matches.test(t.getName())) {
            long c = mx.getThreadCpuTime(t.getId());
            cpu += Math.max(0, c);
          }
        }
      }
      return new RouterSnapshot(cpu, heapUsed(), rssBytes());
    };
  }

  static long processCpuNanos() {
    java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
    if (os instanceof com.sun.management.OperatingSystemMXBean sun) {
      return sun.getProcessCpuTime();
    }
    return -1;
  }

  static long heapUsed() {
    return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
  }

  /** VmRSS of this process from {@code /proc/self/status}, or -1 off Linux. */
  static long rssBytes() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (line.startsWith("VmRSS:")) {
          String[] f = line.substring(6).trim().split("\\s+");
          return Long.parseLong(f[0]) * 1024;
        }
      }
    } catch (IOException | RuntimeException e) {
      // not Linux, or an unexpected format: unknown
    }
    return -1;
  }
}
