package dev.kvrouter.xds.registry;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps the registry equal to {@code workers.yaml}.
 *
 * <p>Polls the file's bytes rather than using a WatchService: editors and config-map mounts replace files by
 * rename or symlink swap, which WatchService reports inconsistently, while a cheap byte comparison every
 * interval is always right. An invalid file is logged with its errors and ignored: the last good fleet stays,
 * because tearing down every cluster on a typo would be an outage.
 */
public final class WorkersFileWatcher implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(WorkersFileWatcher.class);

  private final Path file;
  private final WorkerRegistry registry;
  private byte[] lastBytes;
  private String lastError;
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
      return;
    }
    try {
      registry.replace(WorkersFile.parse(new String(bytes, java.nio.charset.StandardCharsets.UTF_8),
          file.toString()));
      lastBytes = bytes;
      lastError = null;
    } catch (WorkersFile.InvalidWorkersFile e) {
      report("invalid workers file, keeping the last good fleet:\n" + e.getMessage());
    }
  }

  private void report(String message) {
    if (!message.equals(lastError)) {
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
