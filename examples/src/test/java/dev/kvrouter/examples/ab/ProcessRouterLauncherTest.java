package dev.kvrouter.examples.ab;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ProcessRouterLauncherTest {

  /** A {@code /proc/<pid>/task/<tid>} entry with the given name and user / system ticks. */
  private static void task(Path dir, int tid, String comm, long utime, long stime) throws Exception {
    Path t = Files.createDirectories(dir.resolve(Integer.toString(tid)));
    Files.writeString(t.resolve("comm"), comm + "\n");
    Files.writeString(t.resolve("stat"), tid + " (" + comm + ") S 1 1 1 0 -1 4194368 100 0 0 0 " + utime + " "
        + stime + " 0 0 20 0 30 0 1985270 3133440 414\n");
  }

  @Test
  void theJitShareIsTheCompilerThreadsCpuTime(@TempDir Path dir) throws Exception {
    task(dir, 101, "java", 5000, 700);
    task(dir, 102, "C2 CompilerThre", 150, 50);
    task(dir, 103, "C1 CompilerThre", 30, 0);
    task(dir, 104, "kvrouter-events", 900, 100);
    task(dir, 105, "x) C2 CompilerThre", 7, 7); // a name that only looks like one, with a parenthesis in it
    Files.createDirectories(dir.resolve("106")); // a thread that exited between the listing and the read
    // (150 + 50 + 30) ticks of 10 ms
    assertThat(ProcessRouterLauncher.jitCpuNanos(dir)).isEqualTo(2_300_000_000L);
    assertThat(ProcessRouterLauncher.jitCpuNanos(dir.resolve("gone"))).isEqualTo(-1);
  }

  @Test
  void thisJvmsCompilerThreadsHaveWorked() {
    Path self = Path.of("/proc/self/task");
    assumeTrue(Files.isDirectory(self), "Linux only");
    long jit = ProcessRouterLauncher.jitCpuNanos(self);
    long process = ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
    // by now the test JVM has compiled its test framework; a tick is 10 ms
    assertThat(jit).isPositive().isLessThanOrEqualTo(process + 10_000_000L);
  }

  @Test
  void eachReplicasDirectoryFillsInTheJvmOptions() {
    Path first = Path.of("/runs/ab/kvrouter.yaml");
    Path second = Path.of("/runs/ab/replica-2/kvrouter.yaml");
    List<String> options = List.of("-Xmx1g", "-XX:StartFlightRecording=filename={dir}/router.jfr,settings=profile");
    assertThat(ProcessRouterLauncher.command(options, first)).contains("-Xmx1g",
        "-XX:StartFlightRecording=filename=/runs/ab/router.jfr,settings=profile").endsWith("--config",
        "/runs/ab/kvrouter.yaml");
    assertThat(ProcessRouterLauncher.command(options, second))
        .contains("-XX:StartFlightRecording=filename=/runs/ab/replica-2/router.jfr,settings=profile");
  }
}
