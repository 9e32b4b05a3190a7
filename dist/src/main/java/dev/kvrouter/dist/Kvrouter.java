package dev.kvrouter.dist;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The {@code kvrouter} command. {@code all} (the default) runs the xDS server and the ext_proc router in one
 * process; {@code ext-proc} and {@code xds} run one each; {@code demo} starts a whole local stack.
 */
@Command(name = "kvrouter", mixinStandardHelpOptions = true, version = "kvrouter 0.1.0",
    description = "KV-cache-aware request router for LLM serving behind Envoy.",
    subcommands = {Kvrouter.All.class, Kvrouter.ExtProc.class, Kvrouter.Xds.class, Demo.class})
public final class Kvrouter implements Callable<Integer> {

  @Option(names = {"-c", "--config"}, description = "kvrouter.yaml (default: ./kvrouter.yaml if present)")
  Path config;

  public static void main(String[] args) {
    System.exit(new CommandLine(new Kvrouter()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    return run(config, KvrouterRuntime.Mode.ALL);
  }

  static int run(Path configFile, KvrouterRuntime.Mode mode) throws Exception {
    Path file = configFile != null ? configFile : Path.of("kvrouter.yaml");
    KvrouterConfig cfg;
    try {
      cfg = configFile != null || Files.exists(file) ? KvrouterConfig.load(file) : KvrouterConfig.defaults();
    } catch (KvrouterConfig.InvalidConfig e) {
      System.err.println("kvrouter: invalid configuration\n" + e.getMessage());
      return 2;
    }
    Logging.configure(cfg.observability().logFormat(), cfg.observability().logLevel());
    Path base = file.toAbsolutePath().getParent();
    KvrouterRuntime rt;
    try {
      rt = KvrouterRuntime.start(cfg, base, mode);
    } catch (IllegalArgumentException e) {
      System.err.println("kvrouter: cannot start\n" + e.getMessage()); // every problem found, one per line
      return 2;
    } catch (KvrouterRuntime.StartFailure e) {
      System.err.println("kvrouter: cannot start: " + e.getMessage());
      return 2;
    } catch (IOException | RuntimeException e) {
      // Anything else that stops the start (a replicas.bind that cannot bind, ...): one line, not a stack trace.
      // Messages name settings, addresses and files; the tenancy secret is never put in one (SaltKey).
      System.err.println("kvrouter: cannot start: " + KvrouterRuntime.StartFailure.describe(e));
      return 2;
    }
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      System.err.println("kvrouter: shutting down");
      try {
        rt.drain(java.time.Duration.ofMillis(cfg.server().drainMs()));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      rt.close();
      stopped.countDown();
    }, "kvrouter-shutdown"));
    stopped.await();
    return 0;
  }

  /** A mode takes the config after its name too ({@code kvrouter ext-proc --config kvrouter.yaml}). */
  abstract static class Mode implements Callable<Integer> {
    @CommandLine.ParentCommand
    Kvrouter parent;

    @Option(names = {"-c", "--config"}, description = "kvrouter.yaml (default: ./kvrouter.yaml if present)")
    Path config;

    abstract KvrouterRuntime.Mode mode();

    @Override
    public Integer call() throws Exception {
      return run(config != null ? config : parent.config, mode());
    }
  }

  @Command(name = "all", mixinStandardHelpOptions = true,
      description = "Run the xDS server and the ext_proc router in one process (default).")
  static final class All extends Mode {
    @Override
    KvrouterRuntime.Mode mode() {
      return KvrouterRuntime.Mode.ALL;
    }
  }

  @Command(name = "ext-proc", mixinStandardHelpOptions = true, description = "Run only the ext_proc router.")
  static final class ExtProc extends Mode {
    @Override
    KvrouterRuntime.Mode mode() {
      return KvrouterRuntime.Mode.EXT_PROC;
    }
  }

  @Command(name = "xds", mixinStandardHelpOptions = true, description = "Run only the xDS server.")
  static final class Xds extends Mode {
    @Override
    KvrouterRuntime.Mode mode() {
      return KvrouterRuntime.Mode.XDS;
    }
  }
}
