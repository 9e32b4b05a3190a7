package dev.kvrouter.xds.registry;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Reads and validates {@code workers.yaml}: the fleet as an operator writes it.
 *
 * <pre>
 * workers:
 *   - name: worker-1              # [A-Za-z0-9._-]+, unique; its Envoy cluster is kvrouter_worker_&lt;name&gt;
 *     address: 10.0.0.5           # IP literal (ORIGINAL_DST routing needs a resolved address)
 *     port: 8000
 *     model: Qwen/Qwen3-8B        # base model served
 *     adapters: [alice-lora]      # optional LoRA adapters
 *     role: both                  # both | prefill | decode (default both)
 *     dp_size: 1                  # data-parallel ranks, each its own cache (default 1)
 *     block_size: 16              # KV block size in tokens (default: the model's)
 *     weight: 1                   # relative capacity (default 1)
 *     metrics_url: http://10.0.0.5:8000/metrics   # default http://address:port/metrics
 *     draining: false             # true = finish in-flight work, receive nothing new
 *     labels: {zone: a}
 *     events:                     # optional: the engine's --kv-events-config
 *       endpoint: tcp://10.0.0.5:5557
 *       replay_endpoint: tcp://10.0.0.5:5558
 *       topic: ""
 *       bind: false               # true = the router binds and engines connect (llm-d style)
 * </pre>
 *
 * Unknown keys are errors, so a typo never silently drops a setting. Every error names the offending path.
 */
public final class WorkersFile {

  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());
  private static final Pattern NAME = Pattern.compile("[A-Za-z0-9._-]{1,100}");
  private static final Set<String> WORKER_KEYS = Set.of("name", "address", "port", "model", "adapters", "role",
      "dp_size", "block_size", "weight", "metrics_url", "draining", "labels", "events");
  private static final Set<String> EVENT_KEYS = Set.of("endpoint", "replay_endpoint", "topic", "bind");

  private WorkersFile() {}

  /** Thrown with every problem found, one per line, each prefixed by its YAML path. */
  public static final class InvalidWorkersFile extends IllegalArgumentException {
    public InvalidWorkersFile(String message) {
      super(message);
    }
  }

  public static List<Worker> read(Path file) throws IOException {
    return parse(Files.readString(file), file.toString());
  }

  public static List<Worker> parse(String yaml, String source) {
    JsonNode root;
    try {
      root = YAML.readTree(yaml);
    } catch (IOException e) {
      throw new InvalidWorkersFile(source + ": not valid YAML: " + firstLine(e.getMessage()));
    }
    List<String> errors = new ArrayList<>();
    List<Worker> workers = new ArrayList<>();
    if (root == null || root.isMissingNode() || root.isNull()) {
      return workers; // an empty file is an empty fleet
    }
    if (!root.isObject()) {
      throw new InvalidWorkersFile(source + ": top level must be a mapping with a `workers` list");
    }
    for (Iterator<String> it = root.fieldNames(); it.hasNext(); ) {
      String k = it.next();
      if (!k.equals("workers")) {
        errors.add(source + ": unknown key `" + k + "` (expected `workers`)");
      }
    }
    JsonNode list = root.get("workers");
    if (list != null && !list.isNull()) {
      if (!list.isArray()) {
        errors.add(source + ": `workers` must be a list");
      } else {
        Set<String> names = new HashSet<>();
        for (int i = 0; i < list.size(); i++) {
          JsonNode entry = list.get(i);
          // Duplicates are checked on every entry, valid or not, so one run reports every problem.
          String name = entry != null && entry.hasNonNull("name") ? entry.get("name").asText() : null;
          if (name != null && !names.add(name)) {
            errors.add(source + ": workers[" + i + "].name: duplicate worker name `" + name + "`");
          }
          Worker w = worker(entry, source + ": workers[" + i + "]", errors);
          if (w != null) {
            workers.add(w);
          }
        }
      }
    }
    if (!errors.isEmpty()) {
      throw new InvalidWorkersFile(String.join("\n", errors));
    }
    return workers;
  }

  private static Worker worker(JsonNode n, String at, List<String> errors) {
    if (n == null || !n.isObject()) {
      errors.add(at + ": must be a mapping");
      return null;
    }
    int before = errors.size();
    unknownKeys(n, WORKER_KEYS, at, errors);
    String name = text(n, "name", at, errors, true);
    if (name != null && !NAME.matcher(name).matches()) {
      errors.add(at + ".name: `" + name + "` must match [A-Za-z0-9._-]{1,100}");
    }
    String address = text(n, "address", at, errors, true);
    if (address != null && !isIpLiteral(address)) {
      errors.add(at + ".address: `" + address + "` must be an IPv4 or IPv6 literal");
    }
    int port = integer(n, "port", at, errors, -1);
    if (n.has("port") && (port < 1 || port > 65535)) {
      errors.add(at + ".port: must be 1..65535");
    } else if (!n.has("port")) {
      errors.add(at + ".port: required");
    }
    String model = text(n, "model", at, errors, true);
    List<String> adapters = new ArrayList<>();
    JsonNode ad = n.get("adapters");
    if (ad != null && !ad.isNull()) {
      if (!ad.isArray()) {
        errors.add(at + ".adapters: must be a list of adapter names");
      } else {
        ad.forEach(a -> adapters.add(a.asText()));
      }
    }
    Worker.Role role = Worker.Role.BOTH;
    String r = text(n, "role", at, errors, false);
    if (r != null) {
      try {
        role = Worker.Role.valueOf(r.toUpperCase(Locale.ROOT));
      } catch (IllegalArgumentException e) {
        errors.add(at + ".role: `" + r + "` must be one of both, prefill, decode");
      }
    }
    int dpSize = integer(n, "dp_size", at, errors, 1);
    if (dpSize < 1 || dpSize > 1024) {
      errors.add(at + ".dp_size: must be 1..1024");
    }
    int blockSize = integer(n, "block_size", at, errors, 0);
    if (blockSize < 0 || blockSize > 4096) {
      errors.add(at + ".block_size: must be 1..4096 (or omitted)");
    }
    int weight = integer(n, "weight", at, errors, 1);
    if (weight < 1) {
      errors.add(at + ".weight: must be >= 1");
    }
    String metricsUrl = text(n, "metrics_url", at, errors, false);
    boolean draining = n.has("draining") && n.get("draining").asBoolean(false);
    Map<String, String> labels = new LinkedHashMap<>();
    JsonNode lb = n.get("labels");
    if (lb != null && !lb.isNull()) {
      if (!lb.isObject()) {
        errors.add(at + ".labels: must be a mapping");
      } else {
        lb.fields().forEachRemaining(e -> labels.put(e.getKey(), e.getValue().asText()));
      }
    }
    Worker.EventEndpoint events = null;
    JsonNode ev = n.get("events");
    if (ev != null && !ev.isNull()) {
      if (!ev.isObject()) {
        errors.add(at + ".events: must be a mapping");
      } else {
        unknownKeys(ev, EVENT_KEYS, at + ".events", errors);
        String endpoint = text(ev, "endpoint", at + ".events", errors, true);
        String replay = text(ev, "replay_endpoint", at + ".events", errors, false);
        String topic = text(ev, "topic", at + ".events", errors, false);
        boolean bind = ev.has("bind") && ev.get("bind").asBoolean(false);
        for (String e : new String[] {endpoint, replay}) {
          if (e != null && !e.matches("(tcp|ipc|inproc)://.+")) {
            errors.add(at + ".events: `" + e + "` must be a ZMQ endpoint such as tcp://10.0.0.5:5557");
          }
        }
        if (endpoint != null) {
          events = new Worker.EventEndpoint(endpoint, replay, topic, bind);
        }
      }
    }
    if (errors.size() > before) {
      return null;
    }
    return new Worker(name, address, port, model, adapters, role, events, dpSize, blockSize, weight, metricsUrl,
        draining, labels);
  }

  private static void unknownKeys(JsonNode n, Set<String> allowed, String at, List<String> errors) {
    for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
      String k = it.next();
      if (!allowed.contains(k)) {
        errors.add(at + ": unknown key `" + k + "` (allowed: " + String.join(", ", new java.util.TreeSet<>(allowed))
            + ")");
      }
    }
  }

  private static String text(JsonNode n, String key, String at, List<String> errors, boolean required) {
    JsonNode v = n.get(key);
    if (v == null || v.isNull()) {
      if (required) {
        errors.add(at + "." + key + ": required");
      }
      return null;
    }
    if (!v.isValueNode()) {
      errors.add(at + "." + key + ": must be a string");
      return null;
    }
    String s = v.asText();
    if (required && s.isBlank()) {
      errors.add(at + "." + key + ": must not be empty");
      return null;
    }
    return s;
  }

  private static int integer(JsonNode n, String key, String at, List<String> errors, int dflt) {
    JsonNode v = n.get(key);
    if (v == null || v.isNull()) {
      return dflt;
    }
    if (!v.canConvertToInt() || !(v.isIntegralNumber() || v.asText().matches("-?\\d+"))) {
      errors.add(at + "." + key + ": must be an integer");
      return dflt;
    }
    return v.isIntegralNumber() ? v.intValue() : Integer.parseInt(v.asText());
  }

  private static boolean isIpLiteral(String s) {
    if (s.matches("\\d{1,3}(\\.\\d{1,3}){3}")) {
      for (String part : s.split("\\.")) {
        if (Integer.parseInt(part) > 255) {
          return false;
        }
      }
      return true;
    }
    if (s.contains(":") && s.matches("[0-9A-Fa-f:.]+")) {
      try {
        InetAddress.getByName(s); // literal: no DNS lookup happens for this syntax
        return true;
      } catch (IOException e) {
        return false;
      }
    }
    return false;
  }

  private static String firstLine(String s) {
    if (s == null) {
      return "";
    }
    int nl = s.indexOf('\n');
    return nl < 0 ? s : s.substring(0, nl);
  }
}
