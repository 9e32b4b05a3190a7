package dev.kvrouter.bench.index;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/** Pins the calling thread to one CPU with {@code taskset} (Linux; harness use only, best effort). */
final class ThreadPin {

  private ThreadPin() {}

  /** Returns whether the thread is now pinned to {@code cpu}. */
  static boolean pin(int cpu) {
    try {
      String self = Files.readSymbolicLink(Path.of("/proc/thread-self")).toString(); // "<pid>/task/<tid>"
      String tid = self.substring(self.lastIndexOf('/') + 1);
      Process p = new ProcessBuilder("taskset", "-pc", Integer.toString(cpu), tid).redirectErrorStream(true)
          .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
      return p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0;
    } catch (IOException | RuntimeException e) {
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }
}
