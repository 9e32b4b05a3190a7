package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.kvrouter.examples.ab.EnvoyAbStack;
import dev.kvrouter.examples.sim.timing.Presets;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

/**
 * The shipped Prometheus rules ({@code deploy/prometheus/}) checked by the real promtool, unit-tested on their own
 * synthetic series, and run on series scraped from a live router and a real Envoy: every metric the rules name must
 * exist there with the labels they select and group by, a healthy run must fire nothing and give the degraded-routing ratio the router's own counts give, and
 * with the router gone Envoy's own counters must fire the two alerts meant for it. The Grafana dashboard
 * ({@code deploy/grafana/}) is held to the same: every query parses, and names only live series (and their labels) or the rules.
 *
 * <p>Live series become promtool input as if the traffic sent between two scrapes went on once a minute for half an
 * hour: counters grow by what they grew, gauges keep their value.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class PrometheusRulesE2eTest {

  static final String MODEL = "meta-llama/Llama-3.1-8B-Instruct";
  static final Path RULES_DIR = Stack.ROOT.resolve("deploy/prometheus");
  static final Path RULES = RULES_DIR.resolve("kvrouter-rules.yaml");
  static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());
  static final Path DASHBOARD = Stack.ROOT.resolve("deploy/grafana/kvrouter-dashboard.json");
  static final Pattern METRIC = Pattern.compile("\\b(?:kvrouter|envoy|jvm|process|system)_[a-z0-9_]+\\b"
      + "|\\bvllm:[a-z0-9_]+\\b");
  static final Pattern RECORDED = Pattern.compile("\\bkvrouter:[a-z0-9_:]+\\b");
  static final int MINUTES = 30;

  EnvoyAbStack stack;
  Path work;
  /** Scrapes before and after the healthy traffic: router text + Envoy's. */
  String before;
  String healthy;

  /** Prometheus's promtool, built by scripts/setup-promtool.sh; fails (never skips) without it, as CI builds it. */
  static Path promtool() {
    String env = System.getenv("PROMTOOL");
    Path p = env != null && !env.isEmpty() ? Path.of(env) : Stack.ROOT.resolve(".cache/bin/promtool");
    assertThat(p).as("missing %s: run scripts/setup-promtool.sh (CI builds it before the tests)", p).isExecutable();
    return p;
  }

  static String run(Path dir, String... args) throws Exception {
    List<String> cmd = new ArrayList<>(List.of(promtool().toString()));
    cmd.addAll(List.of(args));
    Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("promtool finished").isTrue();
    assertThat(p.exitValue()).as("promtool %s:%n%s", String.join(" ", args), out).isZero();
    return out;
  }

  @BeforeAll
  void start() throws Exception {
    work = Files.createTempDirectory("kvrouter-e2e-rules");
    // truth_check_every 1: every response's usage is read, so the truth-check series exist; a replica link (with no
    // peer yet) so that its series, which the replica alerts name, do
    stack = EnvoyAbStack.start(new EnvoyAbStack.Options(Stack.ROOT, 2, Presets.byId("llama3.1-8b-h100"), MODEL,
        Stack.tokenizer("llama3_1"), 16, 4096, 5, null, false, "routing: {policy: kv_aware}", work, 0, null,
        "replicas: {bind: 'tcp://127.0.0.1:" + dev.kvrouter.examples.envoy.EnvoyProcess.freeLoopbackPort() + "'}",
        null, 1, true), InProcessRouter.launcher(List::of));
  }

  @AfterAll
  void stop() {
    if (stack != null) {
      stack.close();
    }
  }

  @Test
  @Order(1)
  void theRulesAreValidAndEachAlertFiresOnItsPatternAndNotItsNearMisses() throws Exception {
    assertThat(run(RULES_DIR, "check", "rules", RULES.getFileName().toString())).contains("SUCCESS");
    assertThat(run(RULES_DIR, "test", "rules", "kvrouter-rules.test.yaml")).contains("SUCCESS");
  }

  @Test
  @Order(2)
  void onALiveRouterEveryMetricNamedExistsAndAHealthyRunFiresNothing() throws Exception {
    before = scrape();
    for (int i = 0; i < 11; i++) {
      // a third streamed, so the router's TTFT histogram has samples
      HttpResponse<String> r = stack.post("/v1/chat/completions", "{\"model\":\"" + MODEL + "\",\"max_tokens\":2,"
          + "\"stream\":" + (i % 3 == 0) + ",\"messages\":[{\"role\":\"user\",\"content\":\"question " + i
          + ": what does a router do?\"}]}", Map.of());
      assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    }
    // routed by load with a fallback: the router cannot reproduce a prompt given as embeddings
    HttpResponse<String> embeds = stack.post("/v1/completions",
        "{\"model\":\"" + MODEL + "\",\"prompt_embeds\":\"AAAA\",\"max_tokens\":2}", Map.of());
    assertThat(embeds.headers().firstValue("x-kvrouter-served-by")).as("routed to a worker").isPresent();
    // a malformed body: refused by the router before any decision (counted by reason, not an internal error)
    HttpResponse<String> malformed = stack.post("/v1/chat/completions", "{\"model\": ", Map.of());
    assertThat(malformed.statusCode()).isEqualTo(400);
    // the client's error, answered by the router: not degraded routing
    HttpResponse<String> unknown = stack.post("/v1/chat/completions", "{\"model\":\"no-such-model\",\"max_tokens\":2,"
        + "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", Map.of());
    assertThat(unknown.statusCode()).isEqualTo(404);
    Await.until("every routed request ended and the chats' usage checked", Duration.ofSeconds(20), () -> {
      String m = stack.routerMetrics();
      return sum(m, "kvrouter_ledger_requests") == 0 && sum(m, "kvrouter_truth_checks_total") >= 11;
    });
    healthy = scrape();

    Set<String> named = namedMetrics();
    assertThat(named).contains("kvrouter_routing_decisions_total", "envoy_http_ext_proc_failure_mode_allowed");
    Set<String> exported = names(healthy);
    assertThat(named).as("metrics the rules name that the live router and Envoy do not export")
        .allSatisfy(n -> assertThat(exported).contains(n));
    List<String> unknownLabels = new ArrayList<>();
    for (JsonNode r : rules()) {
      unknownLabels.addAll(unknownLabels(r.path("expr").asText(), labels(healthy)));
    }
    assertThat(unknownLabels).as("labels the rules select or group by that the live series do not carry").isEmpty();

    Path dir = testDir();
    StringBuilder t = header();
    t.append("- name: a healthy live run, going on for half an hour\n  interval: 1m\n  input_series:\n");
    series(t, before, healthy, named);
    t.append("  alert_rule_test:\n");
    for (String alert : alertNames()) {
      if (alert.equals("KvrouterDecisionsSlow")) {
        continue; // its live input is a dozen decisions of a cold JVM, whose p99 is their slowest: unit-tested only
      }
      t.append("  - {eval_time: ").append(MINUTES).append("m, alertname: ").append(alert)
          .append(", exp_alerts: []}\n");
    }
    // one routed request in twelve fell back, whatever the unknown model's rejection: 100 in 1,200
    t.append("  promql_expr_test:\n  - expr: round(kvrouter:routing_fallback:ratio5m * 1200)\n    eval_time: ")
        .append(MINUTES).append("m\n    exp_samples:\n    - {labels: '{}', value: 100}\n");
    Files.writeString(dir.resolve("live.test.yaml"), t);
    run(dir, "test", "rules", "live.test.yaml");
  }

  @Test
  @Order(3)
  void theDashboardsQueriesParseAndNameOnlyWhatTheRouterEnvoyVllmAndTheRulesProvide() throws Exception {
    assertThat(healthy).as("runs after the healthy run").isNotNull();
    List<String> exprs = new ArrayList<>();
    for (JsonNode panel : YAML.readTree(DASHBOARD.toFile()).path("panels")) {
      panel.path("targets").forEach(t -> exprs.add(t.path("expr").asText()));
    }
    assertThat(exprs).hasSizeGreaterThan(20);
    // promtool has no expression checker of its own: each query becomes a recording rule for `check rules`
    Path dir = testDir();
    StringBuilder rules = new StringBuilder("groups:\n- name: dashboard\n  rules:\n");
    for (int i = 0; i < exprs.size(); i++) {
      rules.append("  - record: dashboard:query_").append(i).append("\n    expr: '")
          .append(exprs.get(i).replace("'", "''")).append("'\n");
    }
    Files.writeString(dir.resolve("dashboard-queries.yaml"), rules);
    run(dir, "check", "rules", "dashboard-queries.yaml");

    Set<String> recorded = new LinkedHashSet<>();
    for (JsonNode r : rules()) {
      if (r.has("record")) {
        recorded.add(r.path("record").asText());
      }
    }
    // the pause timer appears at the first collection after the router started
    System.gc();
    String engine = new String(java.net.http.HttpClient.newHttpClient().send(java.net.http.HttpRequest.newBuilder(
        stack.targets().get(0).metricsUri()).build(), HttpResponse.BodyHandlers.ofByteArray()).body(),
        StandardCharsets.UTF_8);
    Set<String> exported = names(scrape() + "\n" + engine);
    Map<String, Set<String>> labels = labels(scrape() + "\n" + engine);
    List<String> unknown = new ArrayList<>();
    exprs.forEach(e -> unknown.addAll(unknownLabels(e, labels)));
    assertThat(unknown).as("labels the dashboard's queries select or group by that the live series do not carry")
        .isEmpty();
    for (String e : exprs) {
      String selectors = e.replaceAll("\\{[^}]*\\}", "").replaceAll("\\b(by|without)\\s*\\([^)]*\\)", "");
      Matcher m = METRIC.matcher(selectors);
      while (m.find()) {
        String name = m.group();
        assertThat(exported).as("%s in the dashboard's query %s", name, e).contains(name);
      }
      Matcher r = RECORDED.matcher(selectors);
      while (r.find()) {
        assertThat(recorded).as("recording rule %s in the dashboard's query %s", r.group(), e).contains(r.group());
      }
    }
  }

  @Test
  @Order(4)
  void withTheRouterGoneEnvoysCountersFireTheAlertsMeantForIt() throws Exception {
    assertThat(healthy).as("runs after the healthy run").isNotNull();
    String envoyBefore = stack.envoy().admin("/stats/prometheus");
    stack.killRouter();
    stack.envoy().awaitAdmin("/stats/prometheus", s -> value(s,
        "envoy_cluster_membership_healthy{envoy_cluster_name=\"kvrouter_ext_proc\"}") == 0, Duration.ofSeconds(20));
    for (int i = 0; i < 6; i++) {
      HttpResponse<String> r = stack.post("/v1/chat/completions", "{\"model\":\"" + MODEL + "\",\"max_tokens\":2,"
          + "\"messages\":[{\"role\":\"user\",\"content\":\"while the router is away " + i + "\"}]}", Map.of());
      assertThat(r.statusCode()).as("served by the pool: %s", r.body()).isEqualTo(200);
      assertThat(r.headers().firstValue("x-kvrouter-decision")).as("routed by nobody").isEmpty();
    }
    String envoyAfter = stack.envoy().admin("/stats/prometheus");
    double failedOpen = sum(envoyAfter, "envoy_http_ext_proc_failure_mode_allowed")
        - sum(envoyBefore, "envoy_http_ext_proc_failure_mode_allowed");
    assertThat(failedOpen).as("Envoy counted the requests it sent on unrouted").isGreaterThanOrEqualTo(6);

    Set<String> envoyNamed = new LinkedHashSet<>();
    for (String n : namedMetrics()) {
      if (n.startsWith("envoy_")) {
        envoyNamed.add(n);
      }
    }
    Path dir = testDir();
    StringBuilder t = header();
    t.append("- name: the router gone, live Envoy counters going on for half an hour\n  interval: 1m\n"
        + "  input_series:\n");
    series(t, envoyBefore, envoyAfter, envoyNamed);
    t.append("  alert_rule_test:\n");
    t.append("  - eval_time: ").append(MINUTES).append("m\n    alertname: KvrouterAllRoutersDown\n    exp_alerts:\n"
        + "    - exp_labels: {severity: critical, envoy_cluster_name: kvrouter_ext_proc}\n      exp_annotations:\n"
        + "        summary: \"No healthy kvrouter replica: Envoy balances every request over the pool without cache "
        + "affinity\"\n        runbook: \"docs/operations.md#kvrouterallroutersdown\"\n");
    t.append("  - eval_time: ").append(MINUTES).append("m\n    alertname: KvrouterFailingOpen\n    exp_alerts:\n"
        + "    - exp_labels: {severity: warning}\n      exp_annotations:\n        summary: \"Envoy forwards ")
        .append(String.format(Locale.ROOT, "%.2f", failedOpen / 60))
        .append(" requests/s unrouted because the router did not answer\"\n"
            + "        runbook: \"docs/operations.md#kvrouterfailingopen\"\n");
    Files.writeString(dir.resolve("down.test.yaml"), t);
    run(dir, "test", "rules", "down.test.yaml");
  }

  /** The router's metrics and Envoy's, as Prometheus would scrape the two jobs. */
  String scrape() {
    String router = stack.routerMetrics();
    assertThat(router).as("the router's /metrics").isNotNull();
    return router + "\n" + stack.envoy().admin("/stats/prometheus");
  }

  /** A directory with the rules, for generated tests (rule_files is relative to the test file). */
  Path testDir() throws IOException {
    Path dir = Files.createDirectories(work.resolve("promtool"));
    Files.copy(RULES, dir.resolve(RULES.getFileName()), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    return dir;
  }

  static StringBuilder header() {
    return new StringBuilder("rule_files: [kvrouter-rules.yaml]\nevaluation_interval: 1m\ntests:\n");
  }

  /** The rules' expressions. */
  static List<JsonNode> rules() throws IOException {
    List<JsonNode> out = new ArrayList<>();
    for (JsonNode g : YAML.readTree(RULES.toFile()).path("groups")) {
      g.path("rules").forEach(out::add);
    }
    return out;
  }

  static List<String> alertNames() throws IOException {
    List<String> out = new ArrayList<>();
    for (JsonNode r : rules()) {
      if (r.has("alert")) {
        out.add(r.path("alert").asText());
      }
    }
    return out;
  }

  /** Metric names in the rules' expressions: selectors' label matchers and by/without lists left out. */
  static Set<String> namedMetrics() throws IOException {
    Set<String> out = new LinkedHashSet<>();
    for (JsonNode r : rules()) {
      String expr = r.path("expr").asText().replaceAll("\\{[^}]*\\}", "")
          .replaceAll("\\b(by|without)\\s*\\([^)]*\\)", "");
      Matcher m = METRIC.matcher(expr);
      while (m.find()) {
        out.add(m.group());
      }
    }
    return out;
  }

  /** Labels Prometheus adds to every series of a target, which no exporter writes. */
  static final Set<String> TARGET_LABELS = Set.of("instance", "job");
  static final Pattern SELECTOR = Pattern.compile("([a-zA-Z_][a-zA-Z0-9_:]*)\\{([^}]*)\\}");
  static final Pattern MATCHER = Pattern.compile("([a-zA-Z_][a-zA-Z0-9_]*)\\s*(?:=~|!~|!=|=)\\s*\"");
  static final Pattern GROUPING = Pattern.compile("\\bby\\s*\\(([^)]*)\\)");

  /**
   * A matcher on a label the metric never carries selects nothing (or, with != and !~, everything), and grouping by
   * one makes a single group: either way the alert or panel is quietly wrong while the name checks pass. Each label a
   * selector names must be on that metric's live series, and each `by` label on a series of a metric the expression
   * names (recording rules' own labels aside).
   */
  static List<String> unknownLabels(String expr, Map<String, Set<String>> labels) {
    List<String> out = new ArrayList<>();
    Matcher s = SELECTOR.matcher(expr);
    while (s.find()) {
      Set<String> has = labels.get(s.group(1));
      if (has == null) {
        continue; // a recording rule, or a name the name checks report
      }
      Matcher m = MATCHER.matcher(s.group(2));
      while (m.find()) {
        if (!has.contains(m.group(1)) && !TARGET_LABELS.contains(m.group(1))) {
          out.add(s.group(1) + " has no label " + m.group(1) + " (" + expr.strip() + ")");
        }
      }
    }
    Set<String> named = new LinkedHashSet<>();
    Matcher n = METRIC.matcher(expr.replaceAll("\\{[^}]*\\}", "").replaceAll("\\b(by|without)\\s*\\([^)]*\\)", ""));
    while (n.find()) {
      named.add(n.group());
    }
    Matcher g = GROUPING.matcher(expr);
    while (g.find()) {
      for (String label : g.group(1).split(",")) {
        String l = label.strip();
        if (!l.isEmpty() && !TARGET_LABELS.contains(l) && !named.isEmpty()
            && named.stream().noneMatch(x -> labels.getOrDefault(x, Set.of()).contains(l))) {
          out.add("no metric of " + named + " has label " + l + " (" + expr.strip() + ")");
        }
      }
    }
    return out;
  }

  /** The label names each metric's series carry in Prometheus text. */
  static Map<String, Set<String>> labels(String text) {
    Map<String, Set<String>> out = new LinkedHashMap<>();
    for (String series : samples(text).keySet()) {
      int brace = series.indexOf('{');
      Set<String> has = out.computeIfAbsent(brace < 0 ? series : series.substring(0, brace),
          k -> new LinkedHashSet<>());
      if (brace >= 0) {
        Matcher m = MATCHER.matcher(series.substring(brace));
        while (m.find()) {
          has.add(m.group(1));
        }
      }
    }
    return out;
  }

  /** Metric names in Prometheus text. */
  static Set<String> names(String text) {
    Set<String> out = new LinkedHashSet<>();
    for (String line : text.split("\n")) {
      if (!line.isEmpty() && !line.startsWith("#")) {
        int brace = line.indexOf('{');
        int space = line.indexOf(' ');
        out.add(line.substring(0, brace >= 0 && brace < space ? brace : space));
      }
    }
    return out;
  }

  /** Sample lines of Prometheus text: series (name and labels as written) to value. */
  static Map<String, String> samples(String text) {
    Map<String, String> out = new LinkedHashMap<>();
    for (String line : text.split("\n")) {
      if (!line.isEmpty() && !line.startsWith("#")) {
        int cut = line.lastIndexOf(' ');
        out.put(line.substring(0, cut), line.substring(cut + 1));
      }
    }
    return out;
  }

  /** Names declared as counters or histograms (whose series are counters), from the # TYPE lines. */
  static Set<String> cumulative(String text) {
    Set<String> out = new LinkedHashSet<>();
    for (String line : text.split("\n")) {
      String[] f = line.split(" ");
      if (f.length == 4 && f[0].equals("#") && f[1].equals("TYPE")
          && (f[3].equals("counter") || f[3].equals("histogram"))) {
        out.add(f[2]);
      }
    }
    return out;
  }

  /** promtool input series for every sample of {@code named} metrics: counters growing, gauges held. */
  static void series(StringBuilder t, String from, String to, Set<String> named) {
    Map<String, String> a = samples(from);
    Set<String> counters = cumulative(to);
    for (Map.Entry<String, String> e : samples(to).entrySet()) {
      String series = e.getKey();
      int brace = series.indexOf('{');
      String name = brace < 0 ? series : series.substring(0, brace);
      String base = name.replaceAll("_(bucket|sum|count)$", "");
      if (!named.contains(name)) {
        continue;
      }
      double end = Double.parseDouble(e.getValue());
      StringBuilder values = new StringBuilder();
      if (counters.contains(name) || counters.contains(base)) {
        double start = a.containsKey(series) ? Double.parseDouble(a.get(series)) : 0;
        double step = end - start;
        for (int m = 0; m <= MINUTES; m++) {
          values.append(m == 0 ? "" : " ").append(start + m * step);
        }
      } else {
        values.append(end).append('x').append(MINUTES);
      }
      t.append("  - series: '").append(series).append("'\n    values: '").append(values).append("'\n");
    }
  }

  /** Sum of every sample of {@code name} in Prometheus text. */
  static double sum(String text, String name) {
    double s = 0;
    for (Map.Entry<String, String> e : samples(text == null ? "" : text).entrySet()) {
      String k = e.getKey();
      if (k.equals(name) || k.startsWith(name + "{")) {
        s += Double.parseDouble(e.getValue());
      }
    }
    return s;
  }

  /** One series' value, or NaN. */
  static double value(String text, String series) {
    String v = samples(text == null ? "" : text).get(series);
    return v == null ? Double.NaN : Double.parseDouble(v);
  }
}
