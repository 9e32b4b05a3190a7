package dev.kvrouter.examples.ab;

import dev.kvrouter.examples.process.ChildProcesses;
import dev.kvrouter.examples.report.RouterSnapshot;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Runs {@code dev.kvrouter.dist.Kvrouter --config <file>} (the {@code kvrouter} command) in a child JVM with this
 * JVM's class path, so the router's CPU time and memory are its own: CPU from the process's accounting, RSS from
 * {@code /proc}. Its log (JSON lines, decision records among them) goes to {@code router.log} beside the config.
 */
public final class ProcessRouterLauncher implements RouterLauncher {

  static final String MAIN = "dev.kvrouter.dist.Kvrouter";

  private final List<String> jvmOptions;

  /**
   * @param jvmOptions options of the router JVM, e.g. {@code -Xmx1g}; {@code {dir}} in one stands for the directory
   *     of the router's config, its own for each replica (e.g. a JFR recording per replica:
   *     {@code -XX:StartFlightRecording=filename={dir}/router.jfr}, where JDK 17 does not expand {@code %p})
   */
  public ProcessRouterLauncher(List<String> jvmOptions) {
    this.jvmOptions = List.copyOf(jvmOptions);
  }

  @Override
  public Router start(Path config) throws Exception {
    try {
      Class.forName(MAIN, false, getClass().getClassLoader());
    } catch (ClassNotFoundException e) {
      throw new IllegalStateException("the router (" + MAIN + ") is not on the class path: run with the dist "
          + "module's class path (see docs/benchmarks/ab.md)");
    }
    Path log = config.toAbsolutePath().getParent().resolve("router.log");
    List<String> cmd = command(jvmOptions, config);
    // appended: a router started again on the same config (after a crash) keeps the first one's records
    Process p = ChildProcesses.track(new ProcessBuilder(cmd).redirectErrorStream(true)
        .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start());
    return new Child(p, log);
  }

  /** The router's command line: this JVM's java and class path, {@code jvmOptions} with {@code {dir}} filled in. */
  static List<String> command(List<String> jvmOptions, Path config) {
    Path dir = config.toAbsolutePath().getParent();
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    for (String option : jvmOptions) {
      cmd.add(option.replace("{dir}", dir.toString()));
    }
    // Compiler threads that come and go take their CPU time out of /proc/<pid>/task when they exit, and the JIT
    // share of the router's CPU is read from there: keep the JVM's compiler threads for its whole life.
    cmd.add("-XX:-UseDynamicNumberOfCompilerThreads");
    cmd.add("-cp");
    cmd.add(System.getProperty("java.class.path"));
    cmd.add(MAIN);
    cmd.add("--config");
    cmd.add(config.toAbsolutePath().toString());
    return cmd;
  }

  private static final class Child implements Router {
    private final Process process;
    private final Path log;

    Child(Process process, Path log) {
      this.process = process;
      this.log = log;
    }

    @Override
    public RouterSnapshot snapshot() {
      long cpu = process.info().totalCpuDuration().map(Duration::toNanos).orElse(-1L);
      return new RouterSnapshot(cpu, -1, rss(process.pid()),
          jitCpuNanos(Path.of("/proc", Long.toString(process.pid()), "task")));
    }

    @Override
    public List<String> decisionRecords() {
      List<String> out = new ArrayList<>();
      try {
        for (String line : Files.readAllLines(log, StandardCharsets.UTF_8)) {
          if (line.startsWith("{\"event\":")) {
            out.add(line);
          }
        }
      } catch (IOException e) {
        // no log yet: no records
      }
      return out;
    }

    @Override
    public void kill() {
      process.destroyForcibly(); // SIGKILL
      try {
        process.waitFor(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      ChildProcesses.release(process);
    }

    @Override
    public void close() {
      process.destroy(); // SIGTERM: the router's shutdown hook closes it in order
      try {
        if (!process.waitFor(15, TimeUnit.SECONDS)) {
          process.destroyForcibly();
          process.waitFor(5, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        process.destroyForcibly();
      }
      ChildProcesses.release(process);
    }

    @Override
    public String toString() {
      if (process.isAlive()) {
        return "router pid " + process.pid() + ", log " + log;
      }
      // a router that exited says why at the end of its log (an invalid kvrouter.yaml, a port in use)
      List<String> tail = new ArrayList<>();
      try {
        List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
        tail.addAll(lines.subList(Math.max(0, lines.size() - 5), lines.size()));
      } catch (IOException e) {
        tail.add("(no log: " + e.getMessage() + ")");
      }
      return "router pid " + process.pid() + " exited " + process.exitValue() + ", log " + log + ", last lines: "
          + String.join(" | ", tail);
    }
  }

  /** Linux's fixed unit of {@code /proc/<pid>/task/<tid>/stat} times (USER_HZ), in nanoseconds. */
  private static final long CLOCK_TICK_NANOS = 10_000_000L;

  /**
   * CPU time of a HotSpot JVM's JIT compiler threads ({@code C1 CompilerThread<n>}, {@code C2 CompilerThread<n>},
   * whose names the kernel keeps to 15 characters) under {@code taskDir} ({@code /proc/<pid>/task}): user plus
   * system time, fields 14 and 15 of each thread's {@code stat}. -1 when the directory cannot be read (not Linux,
   * the process gone).
   */
  static long jitCpuNanos(Path taskDir) {
    long ticks = 0;
    try (DirectoryStream<Path> tasks = Files.newDirectoryStream(taskDir)) {
      for (Path task : tasks) {
        try {
          String comm = Files.readString(task.resolve("comm"), StandardCharsets.UTF_8).trim();
          if (!comm.startsWith("C1 CompilerThre") && !comm.startsWith("C2 CompilerThre")) {
            continue;
          }
          String stat = Files.readString(task.resolve("stat"), StandardCharsets.UTF_8);
          // the name in parentheses may hold spaces: count the fields after its closing parenthesis
          String[] f = stat.substring(stat.lastIndexOf(')') + 2).trim().split("\\s+");
          ticks += Long.parseLong(f[11]) + Long.parseLong(f[12]); // utime, stime: fields 14 and 15
        } catch (IOException | RuntimeException e) {
          // a thread that exited between the listing and the read: its time is no longer anyone's
        }
      }
    } catch (IOException e) {
      return -1;
    }
    return ticks * CLOCK_TICK_NANOS;
  }

  /** Resident set size of {@code pid} from {@code /proc/<pid>/status}, or -1 off Linux. */
  static long rss(long pid) {
    try {
      for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
        if (line.startsWith("VmRSS:")) {
          String[] f = line.trim().split("\\s+");
          return Long.parseLong(f[1]) * 1024;
        }
      }
    } catch (IOException | RuntimeException e) {
      return -1;
    }
    return -1;
  }
}
