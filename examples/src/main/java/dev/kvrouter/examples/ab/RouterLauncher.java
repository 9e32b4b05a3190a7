package dev.kvrouter.examples.ab;

import dev.kvrouter.examples.report.RouterSnapshot;
import java.nio.file.Path;
import java.util.List;

/**
 * Starts the router for an A/B through Envoy. The examples module cannot depend on the runtime (the runtime
 * depends on it), so the default launcher runs the real {@code kvrouter} command in a child JVM
 * ({@link ProcessRouterLauncher}); tests with the runtime on their classpath start it in process instead.
 */
@FunctionalInterface
public interface RouterLauncher {

  /**
   * Starts a router from {@code config} (a kvrouter.yaml whose relative paths resolve against its directory) and
   * returns once it runs.
   */
  Router start(Path config) throws Exception;

  /** A running router. */
  interface Router extends AutoCloseable {

    /** Its CPU time, heap and RSS now (fields it cannot know are -1). */
    RouterSnapshot snapshot();

    /** Decision records ({@code kvrouter.decisions} JSON lines) written since the start, or empty if not kept. */
    List<String> decisionRecords();

    /** Stops it at once, as a crash would (no orderly shutdown where the launcher can avoid one). */
    default void kill() {
      close();
    }

    @Override
    void close();
  }
}
