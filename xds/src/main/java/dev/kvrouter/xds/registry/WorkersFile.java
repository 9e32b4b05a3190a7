package dev.kvrouter.xds.registry;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.kvrouter.index.wire.ZmqFrames;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
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
 *     block_size: 16              # KV block size in tokens, 1..4096 (default: the model's)
 *     weight: 1                   # relative capacity (default 1)
 *     metrics_url: http://10.0.0.5:8000/metrics   # default http://address:port/metrics
 *     draining: false             # true = finish in-flight work, receive nothing new
 *     labels: {zone: a}
 *     events:                     # optional: the engine's --kv-events-config
 *       endpoint: tcp://10.0.0.5:5557   # tcp://host:port (rank r: port + r), inproc://, or ipc:// (dp_size 1)
 *       replay_endpoint: tcp://10.0.0.5:5558
 *       topic: ""
 *       bind: false               # true = the router binds and engines connect (llm-d style)
 * </pre>
 *
 * Unknown keys, repeated keys and switches that are not booleans are errors, so a typo never silently drops or
 * flips a setting; so are numbers YAML 1.1 reads in another base ({@code 0x1F40}, {@code 017}), fractions and quoted
 * numbers where a whole number belongs, and nulls where a name belongs. Every error names the offending path.
 */
public final class WorkersFile {

  // A repeated key would otherwise replace the first silently (a worker's second `port:` wins).
  private static final ObjectMapper YAML = new ObjectMapper(YAMLFactory.builder()
      .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build());
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
    } catch (JsonProcessingException e) {
      String line = e.getLocation() == null ? "" : " (line " + e.getLocation().getLineNr() + ")";
      throw new InvalidWorkersFile(source + ": not valid YAML: " + firstLine(e.getOriginalMessage()) + line);
    } catch (IOException e) {
      throw new InvalidWorkersFile(source + ": not valid YAML: " + firstLine(e.getMessage()));
    }
    List<String> errors = new ArrayList<>();
    YamlSpellings.check(YAML.getFactory(), yaml).forEach(e -> errors.add(source + ": " + e));
    List<Worker> workers = new ArrayList<>();
    // An empty file is what a poll sees while an in-place rewrite (`cat > workers.yaml`, most editors) is between
    // truncating and writing: read as an empty fleet it would purge every cluster and index view. Only an explicit
    // `workers: []` empties the fleet.
    if (root == null || root.isMissingNode() || root.isNull()) {
      throw new InvalidWorkersFile(source + ": empty; write `workers: []` for an empty fleet");
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
    // `workers:` with nothing after it reads as an empty string: a file cut off before its list
    if (list == null || list.isNull() || list.isTextual() && list.asText().isEmpty()) {
      errors.add(source + ": no `workers` list; write `workers: []` for an empty fleet");
    } else if (!list.isArray()) {
      errors.add(source + ": `workers` must be a list");
    } else {
      Set<String> names = new HashSet<>();
      Map<String, String> servers = new HashMap<>();
      for (int i = 0; i < list.size(); i++) {
        JsonNode entry = list.get(i);
        // Duplicates are checked on every entry, valid or not, so one run reports every problem.
        String name = entry != null && entry.hasNonNull("name") ? entry.get("name").asText() : null;
        if (name != null && !names.add(name)) {
          errors.add(source + ": workers[" + i + "].name: duplicate worker name `" + name + "`");
        }
        Worker w = worker(entry, source + ": workers[" + i + "]", errors);
        if (w != null) {
          // One server listed twice would count its load twice and split its cache across two views, and Envoy's
          // destination header (address:port) could not tell the two apart; ranks of one server are dp_size.
          String other = servers.putIfAbsent(server(w), w.name());
          if (other != null) {
            errors.add(source + ": workers[" + i + "]: `" + w.endpoint() + "` is also worker `" + other
                + "`; list each server once (data-parallel ranks: dp_size)");
          }
          workers.add(w);
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
      errors.add(at + ".address: `" + address + "` must be an IPv4 or IPv6 literal"
          + (address.matches("[\\d.]+") ? " (IPv4 parts in decimal without leading zeros)" : ""));
    }
    int port = integer(n, "port", at, errors, -1, 1, 65535, "must be 1..65535");
    if (!n.hasNonNull("port")) {
      errors.add(at + ".port: required");
    }
    String model = text(n, "model", at, errors, true);
    List<String> adapters = new ArrayList<>();
    JsonNode ad = n.get("adapters");
    if (ad != null && !ad.isNull()) {
      if (!ad.isArray()) {
        errors.add(at + ".adapters: must be a list of adapter names");
      } else {
        for (int i = 0; i < ad.size(); i++) {
          adapters.add(name(ad.get(i), at + ".adapters[" + i + "]", "an adapter name", errors));
        }
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
    int dpSize = integer(n, "dp_size", at, errors, 1, 1, 1024, "must be 1..1024");
    int blockSize = integer(n, "block_size", at, errors, 0, 1, 4096, "must be 1..4096 (or omitted)");
    int weight = integer(n, "weight", at, errors, 1, 1, Integer.MAX_VALUE, "must be >= 1");
    String metricsUrl = text(n, "metrics_url", at, errors, false);
    if (metricsUrl != null && !isHttpUrl(metricsUrl)) {
      // else the scraper finds nothing to fetch and the worker's load is the router's own count alone, quietly
      errors.add(at + ".metrics_url: `" + metricsUrl + "` must be an http:// or https:// URL with a host");
    }
    boolean draining = bool(n, "draining", at, errors);
    Map<String, String> labels = new LinkedHashMap<>();
    JsonNode lb = n.get("labels");
    if (lb != null && !lb.isNull()) {
      if (!lb.isObject()) {
        errors.add(at + ".labels: must be a mapping");
      } else {
        lb.fields().forEachRemaining(e -> labels.put(e.getKey(),
            name(e.getValue(), at + ".labels." + e.getKey(), "a string", errors)));
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
        boolean bind = bool(ev, "bind", at + ".events", errors);
        endpoint(endpoint, "endpoint", dpSize, !bind, at + ".events", errors);
        endpoint(replay, "replay_endpoint", dpSize, true, at + ".events", errors); // the engine binds its replay
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

  private static final Pattern TCP = Pattern.compile("tcp://(.+):(\\d{1,5})");

  /**
   * Rank r of a data-parallel worker publishes on the endpoint offset by r (ZmqFrames.offsetEndpoint), which the
   * runtime computes when it subscribes. An endpoint it cannot offset, or whose ports run past 65535, must fail
   * here with the file's other errors: at runtime it would only surface inside the fleet listener.
   *
   * <p>An endpoint the router connects to must name the engine's host: {@code tcp://*:5557}, copied from vLLM's
   * {@code --kv-events-config} (where {@code *} tells the engine to bind every interface), reaches the router's own
   * host, so an engine elsewhere was never heard from and nothing said why.
   *
   * @param connects whether the router connects to the endpoint (it binds only {@code endpoint} with {@code bind})
   */
  private static void endpoint(String e, String key, int dpSize, boolean connects, String at, List<String> errors) {
    if (e == null) {
      return;
    }
    if (!e.matches("(tcp|ipc|inproc)://.+")) {
      errors.add(at + "." + key + ": `" + e + "` must be a ZMQ endpoint such as tcp://10.0.0.5:5557");
      return;
    }
    if (e.startsWith("tcp://")) {
      Matcher m = TCP.matcher(e);
      int port = m.matches() ? Integer.parseInt(m.group(2)) : -1;
      if (port < 1 || port > 65535) {
        errors.add(at + "." + key + ": `" + e + "` must be tcp://<host>:<port> with a port in 1..65535");
        return;
      }
      String host = m.group(1);
      if (host.indexOf(':') >= 0 && !(host.startsWith("[") && host.endsWith("]"))) {
        // ZMQ, like a URL, reads an unbracketed IPv6 host's last group as the port
        errors.add(at + "." + key + ": `" + e + "`: an IPv6 host must be in brackets, e.g. tcp://[fd00::5]:5557");
        return;
      }
      if (connects && host.equals("*")) {
        errors.add(at + "." + key + ": `" + e + "`: `*` is the engine's bind address (vLLM's --kv-events-config),"
            + " but the router connects here: name the engine's host, e.g. tcp://10.0.0.5:" + port
            + (key.equals("endpoint") ? " (or set bind: true if the engine connects to the router)" : ""));
        return;
      }
      if (port + dpSize - 1 > 65535) {
        errors.add(at + "." + key + ": `" + e + "` with dp_size " + dpSize + " needs ports up to "
            + (port + dpSize - 1) + " (rank r uses port + r), past 65535");
        return;
      }
    }
    if (dpSize <= 1) {
      return;
    }
    try {
      // whether an endpoint can be offset depends on its scheme, not on the rank: the last rank tells for all
      ZmqFrames.offsetEndpoint(e, dpSize - 1);
    } catch (IllegalArgumentException x) {
      errors.add(at + "." + key + ": `" + e + "` cannot serve dp_size " + dpSize + ": rank r publishes on the "
          + "endpoint offset by r, which only tcp:// (port + r) and inproc:// endpoints allow");
    }
  }

  /** YAML 1.1 words (yes, on) and typos (flase) are strings to the parser; reading them as false hides the typo. */
  private static boolean bool(JsonNode n, String key, String at, List<String> errors) {
    JsonNode v = n.get(key);
    if (v == null || v.isNull()) {
      return false;
    }
    if (!v.isBoolean()) {
      errors.add(at + "." + key + ": must be true or false, was `" + v.asText() + "`");
      return false;
    }
    return v.booleanValue();
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

  /**
   * {@code key}'s whole number in {@code min..max}, or {@code dflt} when absent or invalid (one error either way). A
   * fraction would be truncated and a quoted number guessed at, which kvrouter.yaml's loader refuses too.
   */
  private static int integer(JsonNode n, String key, String at, List<String> errors, int dflt, int min, int max,
      String range) {
    JsonNode v = n.get(key);
    if (v == null || v.isNull()) {
      return dflt;
    }
    if (v.isIntegralNumber() && v.canConvertToInt()) {
      if (v.intValue() < min || v.intValue() > max) {
        errors.add(at + "." + key + ": " + range);
        return dflt;
      }
      return v.intValue();
    }
    String was = v.isNumber() ? v.asText()
        : v.isTextual() ? "string \"" + v.asText() + "\"" + (v.asText().matches("-?\\d+(\\.\\d+)?")
            ? " (write it without quotes)" : "")
        : kind(v);
    errors.add(at + "." + key + ": must be a whole number" + (v.isIntegralNumber() ? " of at most 32 bits" : "")
        + ", was " + was);
    return dflt;
  }

  /** A name or label value: a scalar; a null or a collection has no text of its own (it read as "null" or ""). */
  private static String name(JsonNode v, String at, String what, List<String> errors) {
    if (v == null || v.isNull() || v.isContainerNode() || v.asText().isBlank()) {
      errors.add(at + ": must be " + what + ", was " + kind(v));
      return null;
    }
    return v.asText();
  }

  private static String kind(JsonNode v) {
    return v == null || v.isNull() ? "null" : v.isArray() ? "a list" : v.isObject() ? "a mapping"
        : v.isTextual() && v.asText().isBlank() ? "an empty string" : v.asText();
  }

  /** address:port with the address in one canonical form, so ::1 and 0:0:0:0:0:0:0:1 are the same server. */
  private static String server(Worker w) {
    try {
      return InetAddress.getByName(w.address()).getHostAddress() + "|" + w.port(); // a literal: no lookup
    } catch (IOException e) {
      return w.address() + "|" + w.port();
    }
  }

  private static boolean isIpLiteral(String s) {
    if (s.matches("\\d{1,3}(\\.\\d{1,3}){3}")) {
      for (String part : s.split("\\.")) {
        // 010 is 10 to Java but 8 to inet_aton, and Envoy (inet_pton) refuses it: the ORIGINAL_DST header would
        // fail for every request, and the duplicate-server check would compare another address
        if (Integer.parseInt(part) > 255 || part.length() > 1 && part.startsWith("0")) {
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

  private static boolean isHttpUrl(String s) {
    try {
      java.net.URI u = new java.net.URI(s);
      return ("http".equals(u.getScheme()) || "https".equals(u.getScheme())) && u.getHost() != null;
    } catch (java.net.URISyntaxException e) {
      return false;
    }
  }
}
