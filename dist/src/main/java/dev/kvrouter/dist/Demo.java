package dev.kvrouter.dist;

import dev.kvrouter.examples.envoy.EnvoyProcess;
import dev.kvrouter.examples.fake.FakeWorker;
import java.io.IOException;
import java.io.PrintStream;
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
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code kvrouter demo}: a whole stack on loopback (a real Envoy, the xDS server, the ext_proc router and three
 * fake OpenAI workers), then a few requests through Envoy showing where each one went, then a short A/B of the
 * routing policies against simulated vLLM workers.
 */
@Command(name = "demo", mixinStandardHelpOptions = true, description = "Start Envoy + xDS + ext_proc + 3 fake workers on loopback, send requests, "
    + "then run a short A/B of the routing policies against simulated vLLM workers.")
final class Demo implements Callable<Integer> {

  @Option(names = "--envoy-config", description = "envoy.yaml or envoy-original-dst.yaml (default: envoy.yaml)")
  String envoyConfig = "envoy.yaml";

  @Option(names = "--requests", description = "requests to send (default: 6)")
  int requests = 6;

  @Option(names = "--keep-running", description = "leave the stack up after the requests (Ctrl-C or SIGTERM stops it, Envoy included)")
  boolean keepRunning;

  @Option(names = "--ab", negatable = true, defaultValue = "true", fallbackValue = "true",
      description = "then a short A/B through Envoy against simulated vLLM workers (default: on; --no-ab skips)")
  boolean ab;

  @Option(names = "--ab-out", description = "where the A/B writes its report (default: target/demo-ab)")
  Path abOut = Path.of("target/demo-ab");

  private final PrintStream out = System.out;

  @Override
  public Integer call() throws Exception {
    Logging.configure("text", "warn");
    Path root = Path.of(System.getProperty("kvrouter.root", "."));
    Path envoyYaml = root.resolve("envoy-config").resolve(envoyConfig);
    if (!Files.exists(envoyYaml)) {
      System.err.println("demo: cannot find " + envoyYaml + " (run from the checkout root)");
      return 2;
    }
    Path envoyBin = EnvoyProcess.binary();
    Path dir = Files.createTempDirectory("kvrouter-demo");
    String model = "demo/tiny-model";
    List<FakeWorker> workers = new ArrayList<>();
    StringBuilder yaml = new StringBuilder("workers:\n");
    for (int i = 1; i <= 3; i++) {
      FakeWorker w = new FakeWorker("worker-" + i, model, 20).start("127.0.0.1", 0);
      workers.add(w);
      yaml.append("  - {name: worker-").append(i).append(", address: 127.0.0.1, port: ").append(w.port())
          .append(", model: ").append(model).append("}\n");
    }
    Files.writeString(dir.resolve("workers.yaml"), yaml);
    int listener = freePort(10000);
    int envoyAdmin = freePort(9901);
    int extProc = freePort(9002);
    int xds = freePort(18000);
    int admin = freePort(9090);
    KvrouterConfig cfg = KvrouterConfig.parse(String.format(
        "server: {ext_proc_port: %d, xds_port: %d, admin_port: %d, request_body_mode: %s}%n"
            // the demo prints its own table of where each request went; decision records would interleave
            + "routing: {decision_log: {enabled: false}}%n",
        extProc, xds, admin, envoyConfig.contains("original-dst") ? "FULL_DUPLEX_STREAMED" : "BUFFERED"), "demo");
    try (KvrouterRuntime rt = KvrouterRuntime.start(cfg, dir, KvrouterRuntime.Mode.ALL);
        EnvoyProcess envoy = EnvoyProcess.start(envoyBin,
            EnvoyProcess.withPorts(Files.readString(envoyYaml),
                Map.of(10000, listener, 9901, envoyAdmin, 9002, extProc, 18000, xds)),
            dir.resolve("envoy"), Duration.ofSeconds(30))) {
      envoy.awaitAdmin("/clusters", b -> b.contains("kvrouter_worker_worker-3::"), Duration.ofSeconds(30));
      out.printf("kvrouter demo: Envoy %s on http://127.0.0.1:%d (admin :%d), ext_proc :%d, xDS :%d, metrics "
              + "http://127.0.0.1:%d/metrics%n%n", EnvoyProcess.version(envoyBin), listener, envoy.adminPort(), extProc, xds,
          admin);
      HttpClient http = HttpClient.newHttpClient();
      out.printf("%-4s %-22s %-8s %-10s %s%n", "#", "endpoint", "status", "worker", "decision");
      for (int i = 0; i < requests; i++) {
        boolean chat = i % 2 == 1;
        String body = chat
            ? "{\"model\":\"" + model + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hello " + i + "\"}],"
                + "\"max_tokens\":4,\"stream\":" + (i % 3 == 0) + "}"
            : "{\"model\":\"" + model + "\",\"prompt\":\"hello " + i + "\",\"max_tokens\":4}";
        String path = chat ? "/v1/chat/completions" : "/v1/completions";
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + listener + path))
                .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.ofString());
        out.printf("%-4d %-22s %-8d %-10s %s%n", i + 1, path, r.statusCode(),
            r.headers().firstValue(FakeWorker.SERVED_BY).orElse("?"),
            r.headers().firstValue("x-kvrouter-decision").orElse("-"));
      }
      HttpResponse<String> bad = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + listener
              + "/v1/completions")).header("content-type", "application/json")
              .POST(HttpRequest.BodyPublishers.ofString("{not json")).build(),
          HttpResponse.BodyHandlers.ofString());
      out.printf("%nmalformed body -> %d %s%n", bad.statusCode(), bad.body());
      if (keepRunning) {
        out.println("\nstack is up; Ctrl-C to stop");
        Thread.currentThread().join();
      }
    } finally {
      workers.forEach(FakeWorker::close);
    }
    return ab ? shortAb(root) : 0;
  }

  /**
   * The same question the full A/B answers, in about a minute: four simulated vLLM workers (Qwen3 tokenizer and
   * chat template, paged KV cache, real KV events over ZMQ) behind Envoy, a chat workload whose requests share
   * long system prompts, once per policy with the same seed.
   */
  private int shortAb(Path root) {
    out.printf("%nShort A/B through Envoy (4 simulated vLLM workers, Qwen3 tokenizer, 64 chat requests that share "
        + "16 long system prompts, same seed for every policy); report in %s%n%n", abOut.toAbsolutePath());
    int status = new picocli.CommandLine(new dev.kvrouter.examples.ab.EnvoyAb()).execute(
        "--root", root.toAbsolutePath().toString(),
        "--tokenizer", root.resolve(".cache/tokenizers/qwen3").toAbsolutePath().toString(),
        "--workers", "4",
        "--workload", "system-prompt:count=64,rate=8,prompt=768,sharing=0.8,prefixes=16,output=8",
        "--policies", "kv_aware,round_robin,least_load,cache_only",
        "--max-seconds", "30",
        "--warmup", "64",
        // once under each policy: on a small box the whole stack (router, Envoy, these workers) compiles for
        // hundreds of requests, and warming under kv_aware alone charged the rest of it to kv_aware, run first
        "--warmup-every-policy",
        "--router-jvm", "-Xmx512m",
        "--out", abOut.toString());
    if (status == 0) {
      out.printf("%nHow to read it: at this light load (8 requests/s over 4 workers) kv_aware and cache-only make the "
          + "same cache choices and serve the same share; their TTFTs differ by the noise of a shared small box "
          + "(a millisecond or two, run order included), and kv_aware keeps the workers balanced. Where load and "
          + "hot prefixes make balance pay (8 workers near saturation, the Mooncake trace): BENCHMARKS.md.%n");
    }
    return status;
  }

  private static int freePort(int preferred) throws IOException {
    try (ServerSocket s = new ServerSocket(preferred, 1, java.net.InetAddress.getLoopbackAddress())) {
      return preferred;
    } catch (IOException taken) {
      try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
        return s.getLocalPort();
      }
    }
  }
}
