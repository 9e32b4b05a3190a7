package dev.kvrouter.extproc.model;

import java.util.List;

/** The {@code models:} section has problems; the message lists every one, each with its path. */
public final class InvalidModelConfig extends IllegalArgumentException {

  private final List<String> problems;

  public InvalidModelConfig(List<String> problems) {
    super(String.join("\n", problems));
    this.problems = List.copyOf(problems);
  }

  public List<String> problems() {
    return problems;
  }
}
