package dev.kvrouter.examples.sim.testing;

import java.nio.file.Files;
import java.nio.file.Path;

/** Locates files CI fetches into the checkout; fails (never skips) when one is missing. */
public final class Fixtures {

  private Fixtures() {}

  public static Path root() {
    String root = System.getProperty("kvrouter.root");
    if (root == null) {
      throw new AssertionError("system property kvrouter.root is not set (surefire sets it to the checkout root)");
    }
    return Path.of(root);
  }

  /** {@code .cache/tokenizers/<name>}, which scripts/fetch-tokenizers.sh downloads. */
  public static Path tokenizer(String name) {
    Path dir = root().resolve(".cache/tokenizers").resolve(name);
    if (!Files.isRegularFile(dir.resolve("tokenizer.json"))) {
      throw new AssertionError("missing " + dir.resolve("tokenizer.json")
          + ": run scripts/fetch-tokenizers.sh (CI fetches it before the tests)");
    }
    return dir;
  }
}
