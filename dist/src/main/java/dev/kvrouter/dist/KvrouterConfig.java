package dev.kvrouter.dist;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * {@code kvrouter.yaml}: the one configuration file. Every field has a default (docs/configuration.md lists
 * them); unknown keys are errors; {@link #validate} reports every problem at once, each with its path, before
 * anything starts.
 */
public record KvrouterConfig(
    Server server,
    Workers workers,
    Routing routing,
    Tenancy tenancy,
    Limits limits,
    Observability observability) {

  public KvrouterConfig {
    server = server == null ? new Server(null, 0, 0, 0, null) : server;
    workers = workers == null ? new Workers(null, 0) : workers;
    routing = routing == null ? new Routing(null) : routing;
    tenancy = tenancy == null ? new Tenancy(null) : tenancy;
    limits = limits == null ? new Limits(0, 0) : limits;
    observability = observability == null ? new Observability(null, null) : observability;
  }

  /** Listening addresses and ports. */
  public record Server(String bind, int extProcPort, int xdsPort, int adminPort, String requestBodyMode) {
    public Server {
      bind = bind == null ? "127.0.0.1" : bind;
      extProcPort = extProcPort == 0 ? 9002 : extProcPort;
      xdsPort = xdsPort == 0 ? 18000 : xdsPort;
      adminPort = adminPort == 0 ? 9090 : adminPort;
      requestBodyMode = requestBodyMode == null ? "BUFFERED" : requestBodyMode.toUpperCase(Locale.ROOT);
    }
  }

  /** Where the fleet comes from: a watched workers.yaml (relative paths resolve against kvrouter.yaml). */
  public record Workers(String file, int pollIntervalMs) {
    public Workers {
      file = file == null ? "workers.yaml" : file;
      pollIntervalMs = pollIntervalMs == 0 ? 500 : pollIntervalMs;
    }
  }

  /** The routing policy applied when a request does not override it. */
  public record Routing(String policy) {
    public Routing {
      policy = policy == null ? "round_robin" : policy;
    }
  }

  /** Tenant identity: the trusted header Envoy sets after authentication. */
  public record Tenancy(String header) {
    public Tenancy {
      header = header == null ? "x-tenant-id" : header.toLowerCase(Locale.ROOT);
    }
  }

  /** Bounds that protect the router. */
  public record Limits(int maxBodyBytes, int retryAfterSeconds) {
    public Limits {
      maxBodyBytes = maxBodyBytes == 0 ? 8 * 1024 * 1024 : maxBodyBytes;
      retryAfterSeconds = retryAfterSeconds == 0 ? 1 : retryAfterSeconds;
    }
  }

  /** Logging. {@code log_format: json} (default) writes one JSON object per line. */
  public record Observability(String logFormat, String logLevel) {
    public Observability {
      logFormat = logFormat == null ? "json" : logFormat.toLowerCase(Locale.ROOT);
      logLevel = logLevel == null ? "info" : logLevel.toLowerCase(Locale.ROOT);
    }
  }

  /** Thrown with every configuration problem, one per line. */
  public static final class InvalidConfig extends IllegalArgumentException {
    public InvalidConfig(String message) {
      super(message);
    }
  }

  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory())
      .setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
      .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);

  public static KvrouterConfig defaults() {
    return new KvrouterConfig(null, null, null, null, null, null);
  }

  public static KvrouterConfig load(Path file) throws IOException {
    return parse(Files.readString(file), file.toString());
  }

  public static KvrouterConfig parse(String yaml, String source) {
    KvrouterConfig c;
    try {
      c = yaml.isBlank() ? defaults() : YAML.readValue(yaml, KvrouterConfig.class);
    } catch (UnrecognizedPropertyException e) {
      throw new InvalidConfig(source + ": " + path(e) + ": unknown key `" + e.getPropertyName() + "` (allowed: "
          + e.getKnownPropertyIds().stream().map(Object::toString).sorted().collect(Collectors.joining(", "))
          + ")");
    } catch (JsonMappingException e) {
      throw new InvalidConfig(source + ": " + path(e) + ": " + e.getOriginalMessage());
    } catch (IOException e) {
      throw new InvalidConfig(source + ": not valid YAML: " + e.getMessage());
    }
    if (c == null) {
      c = defaults();
    }
    c.validate(source);
    return c;
  }

  private static String path(JsonMappingException e) {
    String p = e.getPath().stream()
        .map(r -> r.getFieldName() != null ? r.getFieldName() : "[" + r.getIndex() + "]")
        .collect(Collectors.joining("."));
    return p.isEmpty() ? "(top level)" : p;
  }

  /** Checks every value; throws {@link InvalidConfig} listing all problems. */
  public void validate(String source) {
    List<String> errors = new ArrayList<>();
    port(errors, "server.ext_proc_port", server.extProcPort());
    port(errors, "server.xds_port", server.xdsPort());
    port(errors, "server.admin_port", server.adminPort());
    try {
      BodySendMode m = BodySendMode.valueOf(server.requestBodyMode());
      if (m != BodySendMode.BUFFERED && m != BodySendMode.FULL_DUPLEX_STREAMED) {
        errors.add("server.request_body_mode: must be BUFFERED or FULL_DUPLEX_STREAMED");
      }
    } catch (IllegalArgumentException e) {
      errors.add("server.request_body_mode: `" + server.requestBodyMode()
          + "` must be BUFFERED or FULL_DUPLEX_STREAMED");
    }
    if (workers.pollIntervalMs() < 50) {
      errors.add("workers.poll_interval_ms: must be >= 50");
    }
    if (!Policies.NAMES.contains(routing.policy())) {
      errors.add("routing.policy: `" + routing.policy() + "` must be one of " + Policies.NAMES);
    }
    if (limits.maxBodyBytes() < 1024) {
      errors.add("limits.max_body_bytes: must be >= 1024");
    }
    if (limits.retryAfterSeconds() < 1) {
      errors.add("limits.retry_after_seconds: must be >= 1");
    }
    if (!observability.logFormat().equals("json") && !observability.logFormat().equals("text")) {
      errors.add("observability.log_format: must be json or text");
    }
    if (!List.of("trace", "debug", "info", "warn", "error").contains(observability.logLevel())) {
      errors.add("observability.log_level: must be one of trace, debug, info, warn, error");
    }
    if (!errors.isEmpty()) {
      throw new InvalidConfig(errors.stream().map(e -> source + ": " + e).collect(Collectors.joining("\n")));
    }
  }

  private static void port(List<String> errors, String name, int p) {
    if (p < 1 || p > 65535) {
      errors.add(name + ": must be 1..65535");
    }
  }
}
