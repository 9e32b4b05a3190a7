package dev.kvrouter.examples.sim.fleet;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.fasterxml.jackson.dataformat.yaml.YAMLGenerator;
import dev.kvrouter.xds.registry.Worker;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Writes a fleet in the router's {@code workers.yaml} format (the shape {@code WorkersFile} reads: snake_case
 * keys, optional {@code events} block). Only fields that differ from the reader's defaults are written, except
 * the ones an operator always wants to see.
 */
public final class WorkersYaml {

  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory()
      .disable(YAMLGenerator.Feature.WRITE_DOC_START_MARKER)
      .enable(YAMLGenerator.Feature.MINIMIZE_QUOTES));

  private WorkersYaml() {}

  public static String render(List<Worker> workers) {
    List<Map<String, Object>> list = workers.stream().map(WorkersYaml::entry).toList();
    Map<String, Object> root = new LinkedHashMap<>();
    root.put("workers", list);
    try {
      return "# Written by the simulated-worker launcher (dev.kvrouter.examples.sim.fleet.SimFleetMain).\n"
          + YAML.writeValueAsString(root);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Writes atomically (temp file, then move), so a watching router never reads half a file. */
  public static void write(List<Worker> workers, Path file) throws IOException {
    Path dir = file.toAbsolutePath().getParent();
    Files.createDirectories(dir);
    Path tmp = Files.createTempFile(dir, ".workers", ".yaml.tmp");
    try {
      Files.writeString(tmp, render(workers));
      Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    } finally {
      Files.deleteIfExists(tmp);
    }
  }

  private static Map<String, Object> entry(Worker w) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("name", w.name());
    m.put("address", w.address());
    m.put("port", w.port());
    m.put("model", w.model());
    if (!w.adapters().isEmpty()) {
      m.put("adapters", w.adapters());
    }
    m.put("role", w.role().name().toLowerCase(Locale.ROOT));
    m.put("dp_size", w.dpSize());
    if (w.blockSize() > 0) {
      m.put("block_size", w.blockSize());
    }
    m.put("weight", w.weight());
    if (w.metricsUrl() != null) {
      m.put("metrics_url", w.metricsUrl());
    }
    if (w.draining()) {
      m.put("draining", true);
    }
    if (!w.labels().isEmpty()) {
      m.put("labels", new LinkedHashMap<>(w.labels()));
    }
    if (w.events() != null) {
      Map<String, Object> e = new LinkedHashMap<>();
      e.put("endpoint", w.events().endpoint());
      if (w.events().replayEndpoint() != null) {
        e.put("replay_endpoint", w.events().replayEndpoint());
      }
      e.put("topic", w.events().topic());
      e.put("bind", w.events().bind());
      m.put("events", e);
    }
    return m;
  }
}
