package dev.kvrouter.xds.registry;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.wire.ZmqFrames;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WorkersFileTest {

  @Test
  void parsesEveryField() {
    List<Worker> ws = WorkersFile.parse("""
        workers:
          - name: w-1
            address: 10.0.0.5
            port: 8000
            model: Qwen/Qwen3-8B
            adapters: [alice]
            role: decode
            dp_size: 2
            block_size: 16
            weight: 3
            metrics_url: http://10.0.0.5:9000/metrics
            draining: true
            labels: {zone: a}
            events: {endpoint: "tcp://10.0.0.5:5557", replay_endpoint: "tcp://10.0.0.5:5558", topic: kv, bind: true}
          - {name: w2, address: "::1", port: 8001, model: m}
        """, "t");
    Worker w = ws.get(0);
    assertThat(w.name()).isEqualTo("w-1");
    assertThat(w.adapters()).containsExactly("alice");
    assertThat(w.role()).isEqualTo(Worker.Role.DECODE);
    assertThat(w.cacheOwners()).extracting(Object::toString).containsExactly("w-1", "w-1#dp1");
    assertThat(w.events()).isEqualTo(new Worker.EventEndpoint("tcp://10.0.0.5:5557", "tcp://10.0.0.5:5558", "kv",
        true));
    assertThat(w.draining()).isTrue();
    assertThat(w.labels()).containsEntry("zone", "a");
    assertThat(ws.get(1).effectiveMetricsUrl()).isEqualTo("http://[::1]:8001/metrics");
    assertThat(ws.get(1).serves("m")).isTrue();
  }

  @Test
  void reportsEveryProblemWithItsPath() {
    assertThatThrownBy(() -> WorkersFile.parse("""
        workers:
          - {name: "bad name", address: worker.local, port: 70000, model: m, colour: red}
          - {name: ok, address: 10.0.0.1, port: 1, model: m, role: boss, events: {endpoint: "http://x"}}
          - {name: ok, address: 10.0.0.2, port: 2, model: m}
        """, "w.yaml"))
        .isInstanceOf(WorkersFile.InvalidWorkersFile.class)
        .hasMessageContaining("w.yaml: workers[0]: unknown key `colour`")
        .hasMessageContaining("workers[0].name: `bad name` must match")
        .hasMessageContaining("workers[0].address: `worker.local` must be an IPv4 or IPv6 literal")
        .hasMessageContaining("workers[0].port: must be 1..65535")
        .hasMessageContaining("workers[1].role: `boss`")
        .hasMessageContaining("must be a ZMQ endpoint")
        .hasMessageContaining("workers[2].name: duplicate worker name `ok`");
  }

  private static String worker(String extra) {
    return "workers:\n  - name: w1\n    address: 10.0.0.5\n    port: 8000\n    model: m\n" + extra;
  }

  /**
   * A typo or a quoted word is a string to the parser, and used to read as false (a quoted "yes" too). YAML 1.1's
   * bare yes/no/on/off are booleans to the parser (yes is true), so they stay accepted.
   */
  @Test
  void aSwitchThatIsNotTrueOrFalseIsAnError() {
    assertThatThrownBy(() -> WorkersFile.parse(worker("    draining: flase\n"), "w.yaml"))
        .isInstanceOf(WorkersFile.InvalidWorkersFile.class)
        .hasMessageContaining("w.yaml: workers[0].draining: must be true or false, was `flase`");
    assertThatThrownBy(() -> WorkersFile.parse(
        worker("    events: {endpoint: \"tcp://0.0.0.0:5557\", bind: \"yes\"}\n"), "w.yaml"))
        .isInstanceOf(WorkersFile.InvalidWorkersFile.class)
        .hasMessageContaining("w.yaml: workers[0].events.bind: must be true or false, was `yes`");
    assertThatThrownBy(() -> WorkersFile.parse(worker("    draining: 1\n"), "w.yaml"))
        .hasMessageContaining("workers[0].draining: must be true or false, was `1`");
    assertThat(WorkersFile.parse(worker("    draining: true\n"), "w.yaml").get(0).draining()).isTrue();
    assertThat(WorkersFile.parse(worker("    events: {endpoint: \"tcp://0.0.0.0:5557\", bind: yes}\n"), "w.yaml")
        .get(0).events().bind()).isTrue();
  }

  /**
   * The runtime subscribes to rank r at the endpoint offset by r (ZmqFrames.offsetEndpoint); an endpoint it cannot
   * offset threw inside the fleet listener, after xDS had published the fleet.
   */
  @Test
  void eventEndpointsMustServeEveryDataParallelRank() {
    assertThatThrownBy(() -> WorkersFile.parse(
        worker("    dp_size: 2\n    events: {endpoint: \"ipc:///tmp/kv-events\"}\n"), "w.yaml"))
        .isInstanceOf(WorkersFile.InvalidWorkersFile.class)
        .hasMessageContaining("w.yaml: workers[0].events.endpoint: `ipc:///tmp/kv-events` cannot serve dp_size 2");
    assertThatThrownBy(() -> WorkersFile.parse(worker("    events: {endpoint: \"tcp://10.0.0.5\"}\n"), "w.yaml"))
        .hasMessageContaining("w.yaml: workers[0].events.endpoint: `tcp://10.0.0.5` must be tcp://<host>:<port>");
    assertThatThrownBy(() -> WorkersFile.parse(worker("    dp_size: 4\n    events: {endpoint: \"tcp://10.0.0.5:5557\","
        + " replay_endpoint: \"tcp://10.0.0.5:65534\"}\n"), "w.yaml"))
        .hasMessageContaining("workers[0].events.replay_endpoint: `tcp://10.0.0.5:65534` with dp_size 4 needs ports "
            + "up to 65537");
    for (String ep : new String[] {"tcp://10.0.0.5:5557", "tcp://[::1]:5557", "tcp://*:5557", "inproc://kv",
        "ipc:///tmp/kv"}) {
      int dp = ep.startsWith("ipc") ? 1 : 3;
      String bind = ep.contains("*") ? ", bind: true" : ""; // a wildcard host is for binding only
      Worker w = WorkersFile.parse(worker("    dp_size: " + dp + "\n    events: {endpoint: \"" + ep + "\"" + bind
          + "}\n"), "w.yaml").get(0);
      for (WorkerId id : w.cacheOwners()) {
        assertThat(ZmqFrames.offsetEndpoint(w.events().endpoint(), id.dpRank())).as(ep).isNotBlank();
      }
    }
  }

  /**
   * vLLM's --kv-events-config binds {@code tcp://*:5557}; copied into workers.yaml, where the router connects, it
   * reached the router's own host, so an engine on another host was never heard from, silently. Where the router
   * binds ({@code bind: true}) the wildcard is what it means.
   */
  @Test
  void aWildcardHostIsRefusedWhereTheRouterConnects() {
    assertThatThrownBy(() -> WorkersFile.parse(worker("    events: {endpoint: \"tcp://*:5557\"}\n"), "w.yaml"))
        .isInstanceOf(WorkersFile.InvalidWorkersFile.class)
        .hasMessageContaining("w.yaml: workers[0].events.endpoint: `tcp://*:5557`: `*` is the engine's bind address")
        .hasMessageContaining("name the engine's host, e.g. tcp://10.0.0.5:5557 (or set bind: true");
    assertThatThrownBy(() -> WorkersFile.parse(worker("    events: {endpoint: \"tcp://*:5557\", bind: true,"
        + " replay_endpoint: \"tcp://*:5558\"}\n"), "w.yaml"))
        .hasMessageContaining("workers[0].events.replay_endpoint: `tcp://*:5558`: `*` is the engine's bind address")
        .hasMessageNotContaining("events.endpoint:");
    assertThat(WorkersFile.parse(worker("    events: {endpoint: \"tcp://*:5557\", bind: true}\n"), "w.yaml")
        .get(0).events().endpoint()).isEqualTo("tcp://*:5557");
  }

  @Test
  void oneServerListedTwiceIsAnError() {
    assertThatThrownBy(() -> WorkersFile.parse("""
        workers:
          - {name: a, address: "::1", port: 8000, model: m}
          - {name: b, address: "0:0:0:0:0:0:0:1", port: 8000, model: m}
          - {name: c, address: "::1", port: 8001, model: m}
        """, "w.yaml"))
        .isInstanceOf(WorkersFile.InvalidWorkersFile.class)
        .hasMessage("w.yaml: workers[1]: `[0:0:0:0:0:0:0:1]:8000` is also worker `a`; list each server once "
            + "(data-parallel ranks: dp_size)");
  }

  @Test
  void blockSizeIsOneTo4096OrOmitted() {
    assertThatThrownBy(() -> WorkersFile.parse(worker("    block_size: 0\n"), "w.yaml"))
        .hasMessageContaining("w.yaml: workers[0].block_size: must be 1..4096 (or omitted)");
    assertThat(WorkersFile.parse(worker(""), "w.yaml").get(0).blockSize()).isZero();
  }

  /**
   * YAML 1.1 reads 0x1F40 as 8000, 017 as 15 and 1_000 as 1000; a null inside a list or as a key used to become
   * the text "null" or "~" (an adapter named "null"); a fraction or a quoted number for a whole number was an
   * error that did not say what it saw. Each is now an error naming the entry (and the line, for the spelling).
   */
  @Test
  void yamlOdditiesAreErrorsNamingTheEntry() {
    String[][] cases = {
        {"    dp_size: 0x2\n", "workers[0].dp_size (line 6): `0x2` is not a plain decimal number (YAML reads it as 2)"},
        {"    weight: 017\n", "workers[0].weight (line 6): `017` is not a plain decimal number (YAML reads it as 15)"},
        {"    block_size: 1_6\n", "workers[0].block_size (line 6): `1_6` is not a plain decimal number"},
        {"    labels: {tier: 1_0.5}\n", "workers[0].labels.tier (line 6): `1_0.5` is not a plain decimal number"
            + " (YAML reads it as 10.5)"},
        {"    block_size: 16.5\n", "workers[0].block_size: must be a whole number, was 16.5"},
        {"    weight: 2.0\n", "workers[0].weight: must be a whole number, was 2.0"},
        {"    dp_size: \"2\"\n", "workers[0].dp_size: must be a whole number, was string \"2\" (write it without quotes)"},
        {"    adapters: [~]\n", "workers[0].adapters[0]: must be an adapter name, was null"},
        {"    adapters: [a, [b]]\n", "workers[0].adapters[1]: must be an adapter name, was a list"},
        {"    labels: {~: 1}\n", "workers[0].labels.~ (line 6): the key is YAML's null; name it (or quote it)"},
        {"    labels: {zone: ~}\n", "workers[0].labels.zone: must be a string, was null"},
        {"    labels: {zone: {a: 1}}\n", "workers[0].labels.zone: must be a string, was a mapping"},
    };
    for (String[] c : cases) {
      assertThatThrownBy(() -> WorkersFile.parse(worker(c[0]), "w.yaml")).as(c[0])
          .isInstanceOf(WorkersFile.InvalidWorkersFile.class)
          .hasMessageContaining("w.yaml: " + c[1]);
    }
    assertThatThrownBy(() -> WorkersFile.parse(worker("").replace("port: 8000", "port: 0x1F40"), "w.yaml"))
        .hasMessage("w.yaml: workers[0].port (line 4): `0x1F40` is not a plain decimal number (YAML reads it as 8000);"
            + " write the number in decimal");
    assertThatThrownBy(() -> WorkersFile.parse(worker("").replace("port: 8000", "port: 8000.0"), "w.yaml"))
        .hasMessage("w.yaml: workers[0].port: must be a whole number, was 8000.0");
    assertThatThrownBy(() -> WorkersFile.parse(worker("").replace("port: 8000", "port: \"8000\""), "w.yaml"))
        .hasMessage("w.yaml: workers[0].port: must be a whole number, was string \"8000\" (write it without quotes)");
    // what stays accepted: plain numbers, negative ones where allowed, quoted keys, scalars as label values
    Worker w = WorkersFile.parse(worker("    weight: 2\n    labels: {\"~\": a, tier: 1, zone: \"017\"}\n"
        + "    adapters: [\"null-lora\"]\n"), "w.yaml").get(0);
    assertThat(w.weight()).isEqualTo(2);
    assertThat(w.labels()).containsEntry("~", "a").containsEntry("tier", "1").containsEntry("zone", "017");
    assertThat(w.adapters()).containsExactly("null-lora");
  }

  /**
   * A second document (after `---`) was never read, so its workers were silently left out of the fleet; an alias was
   * read as its anchor's name, so `model: *m` served a model named "m". Both are errors naming the line.
   */
  @Test
  void aSecondDocumentOrAnAliasIsAnError() {
    assertThatThrownBy(() -> WorkersFile.parse("workers: []\n---\nworkers:\n"
        + "  - {name: a, address: 10.0.0.1, port: 8000, model: m}\n", "w.yaml"))
        .isInstanceOf(WorkersFile.InvalidWorkersFile.class)
        .hasMessage("w.yaml: (top level) (line 3): a second YAML document; only the first is read, so this one would"
            + " be silently ignored: merge it into the first");
    assertThatThrownBy(() -> WorkersFile.parse("workers:\n  - name: &n qwen\n    address: 10.0.0.1\n    port: 8000\n"
        + "    model: *n\n", "w.yaml"))
        .isInstanceOf(WorkersFile.InvalidWorkersFile.class)
        .hasMessage("w.yaml: workers[0].model (line 5): `*n` is a YAML alias, which would be read as the text \"n\","
            + " not the anchored value; write the value itself");
    // an empty document after the first, as templating tools leave, and an anchor never used stay accepted
    assertThat(WorkersFile.parse("workers: []\n---\n", "w.yaml")).isEmpty();
    assertThat(WorkersFile.parse(worker("").replace("model: ", "model: &m "), "w.yaml")).hasSize(1);
  }

  /** A tag's value was kept as its plain text: `!secret name` read as the word "name". */
  @Test
  void aYamlTagIsAnError() {
    assertThatThrownBy(() -> WorkersFile.parse(worker("").replace("model: ", "model: !secret "), "w.yaml"))
        .isInstanceOf(WorkersFile.InvalidWorkersFile.class)
        .hasMessageContaining("workers[0].model (line ")
        .hasMessageContaining(": the YAML tag `!secret` is not read");
    assertThatThrownBy(() -> WorkersFile.parse(worker("").replace("model: m", "model: !!binary bQ=="), "w.yaml"))
        .isInstanceOf(WorkersFile.InvalidWorkersFile.class).hasMessageContaining("is not read");
  }

  /** A metrics URL the scraper cannot fetch left the worker's load to the router's own count, silently. */
  @Test
  void aMetricsUrlMustBeAnHttpUrl() {
    for (String bad : List.of("not a url", "10.0.0.5:8000/metrics", "ftp://10.0.0.5/metrics", "http:///metrics")) {
      assertThatThrownBy(() -> WorkersFile.parse(worker("    metrics_url: '" + bad + "'\n"), "w.yaml"))
          .as(bad).isInstanceOf(WorkersFile.InvalidWorkersFile.class)
          .hasMessageContaining("workers[0].metrics_url: `" + bad + "` must be an http:// or https:// URL");
    }
    assertThat(WorkersFile.parse(worker("    metrics_url: https://10.0.0.5:8443/metrics\n"), "w.yaml")).hasSize(1);
  }

  /**
   * `010.0.0.1` passed as an IPv4 literal: Java reads it as 10.0.0.1, inet_aton as 8.0.0.1, and Envoy's inet_pton
   * refuses it, so every request routed to that worker through the ORIGINAL_DST header would fail.
   */
  @Test
  void anIpv4AddressWithALeadingZeroIsAnError() {
    assertThatThrownBy(() -> WorkersFile.parse(worker("").replace("10.0.0.5", "10.0.0.05"), "w.yaml"))
        .isInstanceOf(WorkersFile.InvalidWorkersFile.class)
        .hasMessage("w.yaml: workers[0].address: `10.0.0.05` must be an IPv4 or IPv6 literal (IPv4 parts in decimal"
            + " without leading zeros)");
    assertThat(WorkersFile.parse(worker("").replace("10.0.0.5", "10.0.0.0"), "w.yaml").get(0).address())
        .isEqualTo("10.0.0.0");
  }

  @Test
  void aRepeatedKeyIsAnError() {
    assertThatThrownBy(() -> WorkersFile.parse(worker("    port: 8001\n"), "w.yaml"))
        .isInstanceOf(WorkersFile.InvalidWorkersFile.class)
        .hasMessage("w.yaml: not valid YAML: Duplicate field 'port' (line 6)");
  }

  @Test
  void onlyAnExplicitEmptyListIsAnEmptyFleet() {
    assertThat(WorkersFile.parse("workers: []", "t")).isEmpty();
    for (String notSaid : new String[] {"", "\n", "# a comment only\n", "workers:\n", "workers: ~\n"}) {
      assertThatThrownBy(() -> WorkersFile.parse(notSaid, "t")).as(notSaid)
          .isInstanceOf(WorkersFile.InvalidWorkersFile.class)
          .hasMessageContaining("write `workers: []` for an empty fleet");
    }
  }

  /** An in-place rewrite (truncate, then write: `cat > workers.yaml`, kubectl cp, many editors) seen mid-way. */
  @Test
  void aPollThatSeesTheFileTruncatedKeepsTheLastGoodFleet(@TempDir Path dir) throws Exception {
    Path f = dir.resolve("workers.yaml");
    Files.writeString(f, "workers:\n  - {name: a, address: 10.0.0.1, port: 8000, model: m}\n"
        + "  - {name: b, address: 10.0.0.2, port: 8000, model: m}\n");
    WorkerRegistry reg = new WorkerRegistry();
    try (WorkersFileWatcher w = new WorkersFileWatcher(f, reg)) {
      w.loadInitial();
      Files.writeString(f, ""); // truncated by the writer, its new content not yet written
      w.poll();
      assertThat(reg.current().all()).as("workers after a poll saw the truncated file").hasSize(2);
      assertThat(reg.current().version()).isEqualTo(1);
      Files.writeString(f, "workers: []\n"); // said explicitly: the fleet is emptied
      settle(w);
      assertThat(reg.current().all()).isEmpty();
    }
  }

  /**
   * An in-place rewrite seen part-written: cut after a whole entry, or inside a number, the text is still a valid
   * fleet (two of three workers; a port of 80 for 8000). Applied, it would purge the cut workers' index views and
   * load, and send requests to the wrong port, until the next poll. Only bytes that read the same on two polls in a
   * row are applied.
   */
  @Test
  void aPartWrittenFileThatParsesIsNotAppliedUntilItStopsChanging(@TempDir Path dir) throws Exception {
    Path f = dir.resolve("workers.yaml");
    String full = "workers:\n  - {name: a, address: 10.0.0.1, port: 8000, model: m}\n"
        + "  - {name: b, address: 10.0.0.2, port: 8000, model: m}\n"
        + "  - {name: c, address: 10.0.0.3, port: 8000, model: m}\n";
    Files.writeString(f, full);
    WorkerRegistry reg = new WorkerRegistry();
    try (WorkersFileWatcher w = new WorkersFileWatcher(f, reg)) {
      w.loadInitial();
      String edited = full.replace("10.0.0.3, port: 8000", "10.0.0.3, port: 8001");
      for (String partial : List.of(edited.substring(0, edited.indexOf("  - {name: c")),
          edited.substring(0, edited.indexOf("8001") + 2) + "}\n")) {
        Files.writeString(f, partial);
        w.poll();
        assertThat(reg.current().version()).as("a poll saw the part-written file:%n%s", partial).isEqualTo(1);
        Files.writeString(f, edited); // the writer finishes
        w.poll();
        assertThat(reg.current().version()).as("first poll of the finished file").isEqualTo(1);
      }
      w.poll();
      assertThat(reg.current().version()).as("the finished file, read twice alike").isEqualTo(2);
      assertThat(reg.current().get("c").port()).isEqualTo(8001);
      assertThat(reg.current().all()).hasSize(3);
    }
  }

  /** Envoy's ORIGINAL_DST reads {@code fd00::5:8000} as no address at all (503); URLs need the brackets too. */
  @Test
  void anIpv6WorkersAddressIsBracketedWhereAPortFollows() {
    Worker w = WorkersFile.parse("workers: [{name: a, address: 'fd00::5', port: 8000, model: m}]", "w").get(0);
    assertThat(w.endpoint()).isEqualTo("[fd00::5]:8000");
    assertThat(w.effectiveMetricsUrl()).isEqualTo("http://[fd00::5]:8000/metrics");
    assertThat(Worker.simple("b", "10.0.0.1", 8000, "m").endpoint()).isEqualTo("10.0.0.1:8000");
    assertThat(WorkersFile.parse("workers: [{name: a, address: 'fd00::5', port: 8000, model: m, dp_size: 2,"
        + " events: {endpoint: 'tcp://[fd00::5]:5557'}}]", "w").get(0).events().endpoint())
        .isEqualTo("tcp://[fd00::5]:5557");
    assertThatThrownBy(() -> WorkersFile.parse("workers: [{name: a, address: 'fd00::5', port: 8000, model: m,"
        + " events: {endpoint: 'tcp://fd00::5:5557'}}]", "w"))
        .hasMessageContaining("an IPv6 host must be in brackets");
  }

  @Test
  void watcherFollowsTheFileAndKeepsTheLastGoodFleetOnErrors(@TempDir Path dir) throws Exception {
    Path f = dir.resolve("workers.yaml");
    Files.writeString(f, "workers: [{name: a, address: 10.0.0.1, port: 1, model: m}]");
    WorkerRegistry reg = new WorkerRegistry();
    try (WorkersFileWatcher w = new WorkersFileWatcher(f, reg)) {
      w.loadInitial();
      assertThat(reg.current().version()).isEqualTo(1);
      w.poll();
      assertThat(reg.current().version()).as("unchanged bytes, no new version").isEqualTo(1);
      Files.writeString(f, "workers: [{name: a, address: 10.0.0.1, port: 1, model: m},"
          + " {name: b, address: 10.0.0.2, port: 1, model: m}]");
      settle(w);
      assertThat(reg.current().all()).extracting(Worker::name).containsExactly("a", "b");
      Files.writeString(f, "workers: [{name: a, port: 1}]");
      settle(w);
      assertThat(reg.current().all()).hasSize(2);
      Files.delete(f);
      settle(w);
      assertThat(reg.current().all()).hasSize(2);
    }
  }

  /** A change is applied once two polls read it alike (WorkersFileWatcher's class comment). */
  private static void settle(WorkersFileWatcher w) {
    w.poll();
    w.poll();
  }

  @Test
  void initialLoadFailsLoudly(@TempDir Path dir) {
    WorkerRegistry reg = new WorkerRegistry();
    assertThatThrownBy(() -> new WorkersFileWatcher(dir.resolve("missing.yaml"), reg).loadInitial())
        .isInstanceOf(java.nio.file.NoSuchFileException.class);
  }
}
