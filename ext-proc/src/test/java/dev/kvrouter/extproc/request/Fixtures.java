package dev.kvrouter.extproc.request;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Loads committed golden fixtures; a missing file fails the test with the command that generates it. */
public final class Fixtures {

  private Fixtures() {}

  public static JsonNode requestSemantics() {
    return load("request_semantics");
  }

  /** scripts/fixtures/messages_validation.py: bodies vLLM main's Anthropic request model accepts or refuses. */
  public static JsonNode messagesValidation() {
    return load("messages_validation");
  }

  private static JsonNode load(String name) {
    Path root = Path.of(System.getProperty("kvrouter.root", "..")).toAbsolutePath().normalize();
    Path f = root.resolve("ext-proc/src/test/resources/fixtures/request/" + name + ".json");
    if (!Files.isRegularFile(f)) {
      throw new IllegalStateException(f + " is missing: run .venv/bin/python scripts/fixtures/" + name + ".py");
    }
    try {
      return new ObjectMapper().readTree(f.toFile());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
