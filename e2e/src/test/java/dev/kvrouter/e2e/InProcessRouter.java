package dev.kvrouter.e2e;

import dev.kvrouter.dist.KvrouterConfig;
import dev.kvrouter.dist.KvrouterRuntime;
import dev.kvrouter.examples.ab.RouterLauncher;
import dev.kvrouter.examples.loadgen.JvmProbes;
import dev.kvrouter.examples.report.RouterSnapshot;
import java.util.List;
import java.util.function.Supplier;

/**
 * Starts the router in the test's JVM for an {@code EnvoyAbStack} (the examples module cannot depend on the
 * runtime; e2e can): the whole runtime from the stack's generated kvrouter.yaml, probed as this process.
 */
final class InProcessRouter {

  private InProcessRouter() {}

  /** @param decisionRecords what the router's decision records are, as the test captures them */
  static RouterLauncher launcher(Supplier<List<String>> decisionRecords) {
    return config -> {
      KvrouterRuntime rt = KvrouterRuntime.start(KvrouterConfig.load(config), config.getParent(),
          KvrouterRuntime.Mode.ALL);
      var probe = JvmProbes.process();
      return new RouterLauncher.Router() {
        @Override
        public RouterSnapshot snapshot() {
          return probe.get();
        }

        @Override
        public List<String> decisionRecords() {
          return decisionRecords.get();
        }

        @Override
        public void close() {
          rt.close();
        }
      };
    };
  }
}
