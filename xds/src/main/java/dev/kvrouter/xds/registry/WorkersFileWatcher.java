package dev.kvrouter.xds.registry;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps the registry equal to {@code workers.yaml}.
 *
 * <p>Polls the file's bytes rather than using a WatchService: editors and config-map mounts replace files by
 * rename or symlink swap, which WatchService reports inconsistently, while a cheap byte comparison every
 * interval is always right. An invalid file is logged with its errors and ignored: the last good fleet stays,
 * because tearing down every cluster on a typo would be an outage.
 *
 * <p>New bytes are applied only once two polls in a row read them alike. A file rewritten in place is seen part
 * written, and a cut after a whole entry or inside a number still parses: two of three workers, or port 80 for
 * 8000. Applied, that fleet would purge the cut workers' cache views and load and send requests to the wrong
 * port until the next poll; waiting one interval for the bytes to settle costs a change that much latency.
 */
public final class WorkersFileWatcher implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(WorkersFileWatcher.class);

  private final Path file;
  private final WorkerRegistry registry;
  private byte[] lastBytes;
  /** Bytes that differ from {@link #lastBytes}, read by the previous poll: applied if the next reads them again. */
  private byte[] settling;
  /** The last bytes found invalid, not parsed again until they change. */
  private byte[] rejectedBytes;
  private String lastError;
  /** False while the file as last read is not the fleet in force (invalid, missing, unreadable): for alerting. */
  private volatile boolean inForce = true;
  private final AtomicLong rejected = new AtomicLong();
  private ScheduledFuture<?> task;

  public WorkersFileWatcher(Path file, WorkerRegistry registry) {
    this.file = file;
    this.registry = registry;
  }

  /**
   * Loads the file once, failing loudly if it is missing or invalid, so a bad deployment never starts.
   */
  public void loadInitial() throws IOException {
    byte[] bytes = Files.readAllBytes(file);
    registry.replace(WorkersFile.parse(new String(bytes, java.nio.charset.StandardCharsets.UTF_8), file.toString()));
    lastBytes = bytes;
  }

  /** Polls every {@code intervalMillis} on the given scheduler. */
  public synchronized void start(ScheduledExecutorService scheduler, long intervalMillis) {
    task = scheduler.scheduleWithFixedDelay(this::poll, intervalMillis, intervalMillis, TimeUnit.MILLISECONDS);
  }

  /** One poll; public so tests can drive it without waiting. */
  public synchronized void poll() {
    byte[] bytes;
    try {
      bytes = Files.readAllBytes(file);
    } catch (NoSuchFileException e) {
      report("workers file " + file + " is missing; keeping the last good fleet");
      return;
    } catch (IOException e) {
      report("cannot read workers file " + file + ": " + e.getMessage());
      return;
    }
    if (Arrays.equals(bytes, lastBytes)) {
      settling = null;
      lastError = null; // back after an error: the next one is news again
      inForce = true;
      return;
    }
    if (Arrays.equals(bytes, rejectedBytes)) {
      settling = null;
      return;
    }
    if (!Arrays.equals(bytes, settling)) {
      settling = bytes;
      return;
    }
    settling = null;
    try {
      registry.replace(WorkersFile.parse(new String(bytes, java.nio.charset.StandardCharsets.UTF_8),
          file.toString()));
      lastBytes = bytes;
      rejectedBytes = null;
      lastError = null;
      inForce = true;
    } catch (WorkersFile.InvalidWorkersFile e) {
      rejectedBytes = bytes;
      report("invalid workers file, keeping the last good fleet:\n" + e.getMessage());
    }
  }

  /**
   * {@code kvrouter_workers_file_valid}: 0 while the file on disk is not the fleet in force, which the log says once
   * and nothing else shows (requests still succeed on the last good fleet, so an edit that never took goes
   * unnoticed); {@code kvrouter_workers_file_rejected_total}: each such error.
   */
  public WorkersFileWatcher bindTo(MeterRegistry metrics) {
    Gauge.builder("kvrouter.workers.file.valid", this, w -> w.inForce ? 1 : 0)
        .description("1 while workers.yaml as last read is the fleet in force; 0 while it is invalid, missing or "
            + "unreadable and the last good fleet stays")
        .register(metrics);
    FunctionCounter.builder("kvrouter.workers.file.rejected", rejected, AtomicLong::get)
        .description("workers.yaml contents (or read failures) rejected, the last good fleet kept")
        .register(metrics);
    return this;
  }

  private void report(String message) {
    inForce = false;
    if (!message.equals(lastError)) {
      rejected.incrementAndGet();
      log.error(message);
      lastError = message;
    }
  }

  @Override
  public synchronized void close() {
    if (task != null) {
      task.cancel(false);
    }
  }
}
