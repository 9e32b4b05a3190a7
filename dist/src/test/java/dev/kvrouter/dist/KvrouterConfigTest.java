package dev.kvrouter.dist;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.index.media.MediaIdentityConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class KvrouterConfigTest {

  @Test
  void everyFieldHasADocumentedDefault() {
    KvrouterConfig c = KvrouterConfig.parse("", "k.yaml");
    assertThat(c.server().bind()).isEqualTo("127.0.0.1");
    assertThat(c.server().extProcPort()).isEqualTo(9002);
    assertThat(c.server().xdsPort()).isEqualTo(18000);
    assertThat(c.server().adminPort()).isEqualTo(9090);
    assertThat(c.server().requestBodyMode()).isEqualTo("BUFFERED");
    assertThat(c.workers().file()).isEqualTo("workers.yaml");
    assertThat(c.routing().policy()).isEqualTo("kv_aware");
    assertThat(c.tenancy().header()).isEqualTo("x-tenant-id");
    assertThat(c.limits().maxBodyBytes()).isEqualTo(8 * 1024 * 1024);
    assertThat(c.observability().logFormat()).isEqualTo("json");
  }

  @Test
  void theShippedExampleIsValidAndEqualToTheDefaults() throws Exception {
    Path example = Path.of(System.getProperty("kvrouter.root")).resolve("kvrouter.example.yaml");
    assertThat(KvrouterConfig.load(example)).isEqualTo(KvrouterConfig.defaults());
  }

  @Test
  void prefixJumpIsSixteenByDefaultZeroTurnsItOffAndItIsValidated() {
    assertThat(KvrouterConfig.defaults().events().prefixJump()).isEqualTo(16);
    assertThat(KvrouterConfig.parse("events: {enabled: true}\n", "k.yaml").events().prefixJump()).isEqualTo(16);
    assertThat(KvrouterConfig.parse("events: {prefix_jump: 0}\n", "k.yaml").events().prefixJump()).isZero();
    assertThat(KvrouterConfig.parse("events: {prefix_jump: 8}\n", "k.yaml").events().prefixJump()).isEqualTo(8);
    assertThatThrownBy(() -> KvrouterConfig.parse("events: {prefix_jump: 1}\n", "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessageContaining("k.yaml: events.prefix_jump: must be 0 (exact walk) or 2..1024 (jump search stride;"
            + " default 16), was 1");
    assertThatThrownBy(() -> KvrouterConfig.parse("events: {prefix_jump: 4096}\n", "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class).hasMessageContaining("was 4096");
    assertThatThrownBy(() -> KvrouterConfig.parse("events: {prefix_jump: fast}\n", "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class).hasMessageContaining("k.yaml: events.prefix_jump");
  }

  @Test
  void mediaIdentitiesHaveDocumentedDefaultsReachTheIndexAndAreValidated() {
    KvrouterConfig.MediaIdentities d = KvrouterConfig.defaults().events().mediaIdentities();
    assertThat(d.toConfig()).isEqualTo(MediaIdentityConfig.defaults());
    assertThat(d.enabled()).isTrue();
    assertThat(d.maxLearned()).isEqualTo(100_000);
    assertThat(d.learnedTtlMs()).isEqualTo(1_800_000L);
    assertThat(d.maxPending()).isEqualTo(65_536);
    assertThat(d.pendingTtlMs()).isEqualTo(30_000L);
    MediaIdentityConfig set = KvrouterConfig.parse("events: {media_identities: {enabled: false, max_learned: 50,"
        + " pending_ttl_ms: 2000}}\n", "k.yaml").events().mediaIdentities().toConfig();
    assertThat(set.enabled()).isFalse();
    assertThat(set.maxLearned()).isEqualTo(50);
    assertThat(set.pendingTtl()).isEqualTo(Duration.ofSeconds(2));
    assertThat(set.learnedTtl()).isEqualTo(Duration.ofMinutes(30));
    assertThatThrownBy(() -> KvrouterConfig.parse("events: {media_identities: {max_learned: 0, max_pending: -1,"
        + " learned_ttl_ms: 10, pending_ttl_ms: 5}}\n", "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessageContaining("events.media_identities.max_learned: must be 1..10000000, was 0")
        .hasMessageContaining("events.media_identities.max_pending: must be 1..10000000, was -1")
        .hasMessageContaining("events.media_identities.learned_ttl_ms: must be >= 1000, was 10")
        .hasMessageContaining("events.media_identities.pending_ttl_ms: must be 100..600000, was 5");
    assertThatThrownBy(() -> KvrouterConfig.parse("events: {media_identities: {max_lerned: 5}}\n", "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class).hasMessageContaining("unknown key `max_lerned`");
  }

  @Test
  void walkModelsDefaultToNoneAndRejectBlankNames() {
    assertThat(KvrouterConfig.defaults().events().walkModels()).isEmpty();
    assertThat(KvrouterConfig.parse("events: {walk_models: [google/gemma-3-27b-it]}\n", "k.yaml").events()
        .walkModels()).containsExactly("google/gemma-3-27b-it");
    assertThatThrownBy(() -> KvrouterConfig.parse("events: {walk_models: ['']}\n", "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessageContaining("k.yaml: events.walk_models[0]: must be a model name");
  }

  @Test
  void staleViewsAreCreditedAsUsageConfirmsThemUnlessTurnedOff() {
    assertThat(KvrouterConfig.defaults().events().staleViewTrust()).isTrue();
    assertThat(KvrouterConfig.parse("events: {stale_recovery_ms: 5000}\n", "k.yaml").events().staleViewTrust())
        .isTrue();
    assertThat(KvrouterConfig.parse("events: {stale_view_trust: false}\n", "k.yaml").events().staleViewTrust())
        .isFalse();
  }

  @Test
  void replicasShareNothingByDefaultAndTheirEndpointsAreValidated() {
    KvrouterConfig.Replicas d = KvrouterConfig.defaults().replicas();
    assertThat(d.bind()).isEmpty();
    assertThat(d.peers()).isEmpty();
    assertThat(d.peerTimeoutMs()).isEqualTo(3000);
    KvrouterConfig.Replicas r = KvrouterConfig.parse(
        "replicas: {bind: 'tcp://0.0.0.0:5601', peers: ['tcp://router-b:5601'], peer_timeout_ms: 5000}\n",
        "k.yaml").replicas();
    assertThat(r.peers()).containsExactly("tcp://router-b:5601");
    assertThat(r.peerTimeoutMs()).isEqualTo(5000);
    assertThatThrownBy(() -> KvrouterConfig.parse(
        "replicas: {bind: '0.0.0.0:5601', peers: ['router-b', 'tcp://c:*'], peer_timeout_ms: 500}\n", "k.yaml"))
        .hasMessageContaining("replicas.bind: must be tcp://<host>:<port>")
        .hasMessageContaining("replicas.peers[0]: must be tcp://<host>:<port>")
        .hasMessageContaining("replicas.peers[1]")
        .hasMessageContaining("replicas.peer_timeout_ms: must be >= 1500");
    assertThatThrownBy(() -> KvrouterConfig.parse("replicas: {peers: ['tcp://b:5601']}\n", "k.yaml"))
        .hasMessageContaining("replicas.peers: set replicas.bind too");
  }

  @Test
  void theReplicaLinksCurveIsOffByDefaultAndNeedsASecretKeyAndTheLink() {
    KvrouterConfig.Curve d = KvrouterConfig.defaults().replicas().curve();
    assertThat(d.enabled()).isFalse();
    assertThat(d.secretKeyFile()).isNull();
    assertThat(d.publicKeyFile()).isNull();
    KvrouterConfig.Curve c = KvrouterConfig.parse("replicas: {bind: 'tcp://0.0.0.0:5601', curve: {secret_key_file: "
        + "curve/key, public_key_file: curve/key.pub}}\n", "k.yaml").replicas().curve();
    assertThat(c.enabled()).isTrue();
    assertThat(c.secretKeyFile()).isEqualTo("curve/key");
    assertThat(c.publicKeyFile()).isEqualTo("curve/key.pub");
    assertThatThrownBy(() -> KvrouterConfig.parse("replicas: {bind: 'tcp://0.0.0.0:5601', curve: {public_key_file: "
        + "k.pub}}\n", "k.yaml")).hasMessageContaining("replicas.curve.public_key_file: set "
        + "replicas.curve.secret_key_file too");
    assertThatThrownBy(() -> KvrouterConfig.parse("replicas: {curve: {secret_key_file: k}}\n", "k.yaml"))
        .hasMessageContaining("replicas.curve: set replicas.bind too");
    assertThatThrownBy(() -> KvrouterConfig.parse("replicas: {bind: 'tcp://0.0.0.0:5601', curve: {secret_key: k}}\n",
        "k.yaml")).hasMessageContaining("secret_key");
  }

  @Test
  void scrapesAskForTheRoutersGaugesOnlyUnlessTurnedOff() {
    assertThat(KvrouterConfig.defaults().routing().scrape().filter()).isTrue();
    assertThat(KvrouterConfig.parse("routing: {scrape: {filter: false}}\n", "k.yaml").routing().scrape().filter())
        .isFalse();
    assertThatThrownBy(() -> KvrouterConfig.parse("routing: {scrape: {filter: 'no'}}\n", "k.yaml"))
        .hasMessageContaining("routing.scrape.filter");
  }

  @Test
  void aStoppingRouterDrainsForTwoSecondsUnlessTold() {
    assertThat(KvrouterConfig.defaults().server().drainMs()).isEqualTo(2000);
    assertThat(KvrouterConfig.parse("server: {drain_ms: 0}\n", "k.yaml").server().drainMs()).isZero();
  }

  @Test
  void theBodiesHeldAtOnceAreAQuarterOfTheHeapUnlessToldAndNeverUnderOneBody() {
    KvrouterConfig.Limits defaults = KvrouterConfig.defaults().limits();
    assertThat(defaults.bufferedBodyBudget(4L << 30)).isEqualTo(1L << 30);
    assertThat(defaults.bufferedBodyBudget(16L << 20)).as("a small heap still holds one body").isEqualTo(8 << 20);
    assertThat(KvrouterConfig.parse("limits: {max_buffered_body_bytes: 17179869184}\n", "k.yaml").limits()
        .bufferedBodyBudget(4L << 30)).isEqualTo(16L << 30);
    assertThatThrownBy(() -> KvrouterConfig.parse("limits: {max_buffered_body_bytes: 1024}\n", "k.yaml"))
        .hasMessageContaining("limits.max_buffered_body_bytes: must be >= limits.max_body_bytes (8388608), was 1024");
  }

  @Test
  void stopStringsAreCappedAtVllmsDefaultUnlessTold() {
    assertThat(KvrouterConfig.defaults().limits().maxStopStrings()).isEqualTo(4);
    assertThat(KvrouterConfig.parse("limits: {max_stop_strings: 16}\n", "k.yaml").limits().maxStopStrings())
        .isEqualTo(16);
    assertThatThrownBy(() -> KvrouterConfig.parse("limits: {max_stop_strings: -1}\n", "k.yaml"))
        .hasMessageContaining("limits.max_stop_strings: must be >= 0, was -1");
  }

  @Test
  void theStallWatchdogWaitsTwoSecondsUnlessToldAndZeroTurnsItOff() {
    assertThat(KvrouterConfig.defaults().server().stallMs()).isEqualTo(2000);
    assertThat(KvrouterConfig.parse("server: {stall_ms: 0}\n", "k.yaml").server().stallMs()).isZero();
    assertThatThrownBy(() -> KvrouterConfig.parse("server: {stall_ms: 600001}\n", "k.yaml"))
        .hasMessageContaining("server.stall_ms: must be in [0, 600000]");
  }

  @Test
  void unknownKeysAreErrorsNamingTheAllowedOnes() {
    assertThatThrownBy(() -> KvrouterConfig.parse("server:\n  ext_proc_prot: 1\n", "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessageContaining("k.yaml: server.ext_proc_prot: unknown key `ext_proc_prot`")
        .hasMessageContaining("ext_proc_port");
  }

  @Test
  void allValueProblemsAreReportedAtOnce() {
    assertThatThrownBy(() -> KvrouterConfig.parse("""
        server: {xds_port: 70000, request_body_mode: STREAMED, drain_ms: -1, stall_ms: -1}
        routing: {policy: magic}
        limits: {max_body_bytes: 10}
        observability: {log_format: xml, truth_check_every: -1}
        """, "k.yaml"))
        .hasMessageContaining("server.xds_port: must be 1..65535")
        .hasMessageContaining("server.request_body_mode: must be BUFFERED or FULL_DUPLEX_STREAMED")
        .hasMessageContaining("server.drain_ms: must be in [0, 60000]")
        .hasMessageContaining("server.stall_ms: must be in [0, 600000]")
        .hasMessageContaining("routing.policy: `magic`")
        .hasMessageContaining("limits.max_body_bytes: must be >= 1024")
        .hasMessageContaining("observability.log_format: must be json or text")
        .hasMessageContaining("observability.truth_check_every: must be >= 0");
  }

  /**
   * The first unknown key or value of the wrong type used to be reported alone, before any value was checked, and of
   * routing.weights only the first bad value: a file with six problems took six runs to fix. Now every problem
   * comes at once with its path, and a value that could not be read (or sits under an unknown key) is not also
   * reported as out of range.
   */
  @Test
  void unknownKeysWrongTypesAndBadValuesAreAllReportedAtOnce() {
    String yaml = """
        server: {ext_proc_prot: 9002, xds_port: lots, admin_port: 70000}
        routing:
          weights: {gpu_credit: -1, imbalance_rel: 0.5, temperature: "0.1"}
          load: {default_block_size: 16.5}
        events: {enabled: "false", walk_models: [a, [b]]}
        models: [{name: m, block_size: x}, {name: n, tokenzier: t}]
        limits: {max_body_bytes: 10, retry_after_seconds: 0x10}
        observability: 5
        """;
    assertThatThrownBy(() -> KvrouterConfig.parse(yaml, "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .satisfies(e -> assertThat(e.getMessage().split("\n")).containsExactlyInAnyOrder(
            "k.yaml: limits.retry_after_seconds (line 7): `0x10` is not a plain decimal number (YAML reads it as 16);"
                + " write the number in decimal",
            "k.yaml: server.ext_proc_prot: unknown key `ext_proc_prot` (allowed: admin_port, bind, drain_ms,"
                + " ext_proc_port, request_body_mode, stall_ms, xds_port)",
            "k.yaml: server.xds_port: must be a whole number, was string \"lots\"",
            "k.yaml: server.admin_port: must be 1..65535, was 70000",
            "k.yaml: routing.weights.gpu_credit: gpu_credit must be a finite number >= 0, was -1.0",
            "k.yaml: routing.weights.imbalance_rel: imbalance_rel must be >= 1, was 0.5",
            "k.yaml: routing.weights.temperature: must be a number, was string \"0.1\" (write it without quotes)",
            "k.yaml: routing.load.default_block_size: must be a whole number, was floating-point 16.5",
            "k.yaml: events.enabled: must be true or false, was string \"false\" (write it without quotes)",
            "k.yaml: events.walk_models[1]: must be a string, was a list",
            "k.yaml: models[0].block_size: must be a whole number, was string \"x\"",
            "k.yaml: models[1].tokenzier: unknown key `tokenzier` (allowed: adapters, block_size, chat_template,"
                + " messages_inline_system, multimodal, name, preload, tenancy, tokenizer, tokenizer_config)",
            "k.yaml: limits.max_body_bytes: must be >= 1024, was 10",
            "k.yaml: observability: must be a mapping, was 5"));
    assertThatThrownBy(() -> KvrouterConfig.parse("models: {a: 1}\n", "k.yaml"))
        .hasMessage("k.yaml: models: must be a list, was a mapping");
    assertThatThrownBy(() -> KvrouterConfig.parse("5\n", "k.yaml"))
        .hasMessage("k.yaml: (top level): must be a mapping, was 5");
    assertThat(KvrouterConfig.parse("# nothing but a comment\n", "k.yaml")).isEqualTo(KvrouterConfig.defaults());
  }

  /**
   * A zero written in the file used to become the default without a word (max_body_bytes: 0 was 8 MiB, a port 0 the
   * default port). It is rejected with its path and range; where 0 is documented as a setting, it is honoured.
   */
  @Test
  void aWrittenZeroIsHonouredOrRejectedNeverReplacedByTheDefault() {
    assertThatThrownBy(() -> KvrouterConfig.parse("""
        server: {ext_proc_port: 0, xds_port: 0, admin_port: 0}
        workers: {poll_interval_ms: 0}
        events: {max_index_entries: 0, predicted_ttl_ms: 0, approximate_ttl_ms: 0}
        limits: {max_body_bytes: 0, retry_after_seconds: 0}
        replicas: {bind: 'tcp://127.0.0.1:5601', peer_timeout_ms: 0, max_queued: 0, resolve_interval_ms: 0}
        """, "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessageContaining("k.yaml: server.ext_proc_port: must be 1..65535, was 0")
        .hasMessageContaining("k.yaml: server.xds_port: must be 1..65535, was 0")
        .hasMessageContaining("k.yaml: server.admin_port: must be 1..65535, was 0")
        .hasMessageContaining("k.yaml: workers.poll_interval_ms: must be >= 50, was 0")
        .hasMessageContaining("k.yaml: events.max_index_entries: must be >= 1024, was 0")
        .hasMessageContaining("k.yaml: events.predicted_ttl_ms: must be >= 1, was 0")
        .hasMessageContaining("k.yaml: events.approximate_ttl_ms: must be >= 1, was 0")
        .hasMessageContaining("k.yaml: limits.max_body_bytes: must be >= 1024, was 0")
        .hasMessageContaining("k.yaml: limits.retry_after_seconds: must be >= 1, was 0")
        .hasMessageContaining("k.yaml: replicas.peer_timeout_ms: must be >= 1500")
        .hasMessageContaining("k.yaml: replicas.max_queued: must be >= 1024")
        .hasMessageContaining("k.yaml: replicas.resolve_interval_ms: must be >= 500");
    KvrouterConfig zeros = KvrouterConfig.parse("""
        server: {drain_ms: 0}
        events: {subscriber_threads: 0, stale_recovery_ms: 0, prefix_jump: 0}
        routing:
          weights: {temperature: 0, bounded_load: 0}
          busy: {max_prefill_tokens: 0, max_kv_usage: 0}
          health: {unreachable_after: 0, eject_after_errors: 0}
        observability: {truth_check_every: 0}
        """, "k.yaml");
    assertThat(zeros.server().drainMs()).isZero();
    assertThat(zeros.events().subscriberThreads()).as("documented: 0 = min(4, cores)")
        .isEqualTo(KvrouterConfig.defaults().events().subscriberThreads()).isPositive();
    assertThat(zeros.events().staleRecoveryMs()).isZero();
    assertThat(zeros.events().prefixJump()).isZero();
    assertThat(zeros.routing().weights().boundedLoad()).isZero();
    assertThat(zeros.routing().busy().maxPrefillTokens()).isZero();
    assertThat(zeros.routing().health().unreachableAfter()).isZero();
    assertThat(zeros.observability().truthCheckEvery()).isZero();
  }

  /** 0 is documented (Events, docs/index.md) and implemented (WorkerEventHealth); it was read as unset. */
  @Test
  void staleRecoveryZeroKeepsAStaleViewStaleUntilAnExplicitRecovery() {
    assertThat(KvrouterConfig.parse("events:\n  stale_recovery_ms: 0\n", "k.yaml").events().staleRecoveryMs())
        .isZero();
    assertThat(KvrouterConfig.parse("events: {enabled: true}\n", "k.yaml").events().staleRecoveryMs())
        .isEqualTo(60_000);
    assertThatThrownBy(() -> KvrouterConfig.parse("events: {stale_recovery_ms: -1}\n", "k.yaml"))
        .hasMessageContaining("events.stale_recovery_ms: must be >= 0 (0: only an explicit recovery), was -1");
  }

  /** A second `events:` used to replace the first whole, silently. */
  @Test
  void aRepeatedKeyIsAnErrorNamingIt() {
    assertThatThrownBy(() -> KvrouterConfig.parse(
        "events:\n  subscriber_threads: 2\nserver:\n  admin_port: 9191\nevents:\n  enabled: false\n", "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessage("k.yaml: (top level): key `events` appears twice (line 5); the second would silently replace "
            + "the first");
    assertThatThrownBy(() -> KvrouterConfig.parse("models:\n  - {name: a, block_size: 16, block_size: 8}\n",
        "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessageStartingWith("k.yaml: models[0]: key `block_size` appears twice");
  }

  /** 9002.9 was truncated to port 9002; quoted numbers and switches were converted as well. */
  @Test
  void numbersAndSwitchesAreTakenOnlyAsWritten() {
    assertThatThrownBy(() -> KvrouterConfig.parse("server:\n  ext_proc_port: 9002.9\n", "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessage("k.yaml: server.ext_proc_port: must be a whole number, was floating-point 9002.9");
    assertThatThrownBy(() -> KvrouterConfig.parse("server: {xds_port: \"18000\"}\n", "k.yaml"))
        .hasMessage("k.yaml: server.xds_port: must be a whole number, was string \"18000\" (write it without "
            + "quotes)");
    assertThatThrownBy(() -> KvrouterConfig.parse("events: {enabled: \"false\"}\n", "k.yaml"))
        .hasMessage("k.yaml: events.enabled: must be true or false, was string \"false\" (write it without quotes)");
    assertThatThrownBy(() -> KvrouterConfig.parse("routing: {weights: {gpu_credit: \"2\"}}\n", "k.yaml"))
        .hasMessageStartingWith("k.yaml: routing.weights.gpu_credit: must be a number");
    assertThat(KvrouterConfig.parse("routing: {weights: {gpu_credit: 2}}\n", "k.yaml").routing().weights()
        .gpuCredit()).as("a whole number is a number").isEqualTo(2.0);
  }

  /**
   * A model's weights are typed as strictly as the global section's: they were read untyped and through the header
   * syntax, so a quoted number, `1` or "on" for the gate, and .inf all loaded there while routing.weights refused them.
   */
  @Test
  void aModelsWeightsAreTypedAsStrictlyAsTheGlobalOnes() {
    for (String bad : List.of("{temperature: \"0.1\"}", "{imbalance_gate: 1}", "{imbalance_gate: \"on\"}",
        "{gpu_credit: .inf}", "{gpu_credit: true}")) {
      assertThatThrownBy(() -> KvrouterConfig.parse("routing: {models: {m: {weights: " + bad + "}}}\n", "k.yaml"))
          .as(bad).isInstanceOf(KvrouterConfig.InvalidConfig.class).hasMessageContaining("routing.models.m.weights");
    }
    KvrouterConfig c = KvrouterConfig.parse(
        "routing: {models: {m: {weights: {temperature: 0.25, imbalance_gate: false, gpu_credit: 2}}}}\n", "k.yaml");
    var m = RoutingSettings.toConfig(c.routing()).models().get("m").weights();
    assertThat(m.temperature()).isEqualTo(0.25);
    assertThat(m.imbalanceGate()).isFalse();
    assertThat(m.gpuCredit()).isEqualTo(2.0);
  }

  /**
   * A null element of a list or map (`peers: [~]`, an empty `- ` line) threw inside a record's constructor, and the
   * operator read "Cannot construct instance of `dev.kvrouter.dist.KvrouterConfig$Replicas`, problem:
   * `java.lang.NullPointerException`" without the key; the checks written for such elements never ran.
   */
  @Test
  void aNullElementIsReportedWithItsPathNotAsAnException() {
    String[][] cases = {
        {"replicas: {bind: \"tcp://127.0.0.1:5601\", peers: [~]}\n",
            "k.yaml: replicas.peers[0]: must be tcp://<host>:<port> (another replica's replicas.bind)"},
        {"events: {walk_models: [~]}\n", "k.yaml: events.walk_models[0]: must be a model name"},
        {"models: [{name: m, adapters: [a, ~]}]\n", "k.yaml: models[0].adapters[1]: must be a non-empty name"},
    };
    for (String[] c : cases) {
      assertThatThrownBy(() -> KvrouterConfig.parse(c[0], "k.yaml")).as(c[0])
          .isInstanceOf(KvrouterConfig.InvalidConfig.class)
          .hasMessage(c[1]);
    }
    // a model's override with no keys inherits every global setting, as `m: {}` does
    assertThat(RoutingSettings.toConfig(KvrouterConfig.parse("routing: {models: {m: ~}}\n", "k.yaml").routing())
        .models()).isEmpty();
  }

  /**
   * The replicas' endpoints were matched by pattern only, so `tcp://0.0.0.0:99999` or a peer on port 0 loaded, and
   * the replica link could then never bind or reach them; ports are checked as the servers' are.
   */
  @Test
  void aReplicaEndpointsPortIsOneTo65535() {
    assertThatThrownBy(() -> KvrouterConfig.parse("replicas: {bind: \"tcp://0.0.0.0:99999\", peers: [\"tcp://a:0\","
        + " \"tcp://b:70000\"]}\n", "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessage("k.yaml: replicas.bind: port must be 1..65535, was 99999\n"
            + "k.yaml: replicas.peers[0]: port must be 1..65535, was 0\n"
            + "k.yaml: replicas.peers[1]: port must be 1..65535, was 70000");
    assertThat(KvrouterConfig.parse("replicas: {bind: \"tcp://0.0.0.0:*\", peers: [\"tcp://a:65535\"]}\n", "k.yaml")
        .replicas().peers()).containsExactly("tcp://a:65535");
  }

  /**
   * A second document (after `---`) was never read, so a file with its settings split in two started on the
   * defaults of the second half; an alias was read as its anchor's name, so `[*b]` listed a model named "b".
   */
  @Test
  void aSecondDocumentOrAnAliasIsAnErrorNamingTheLine() {
    assertThatThrownBy(() -> KvrouterConfig.parse("server: {admin_port: 9091}\n---\nlimits: {max_body_bytes: 1}\n",
        "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessage("k.yaml: (top level) (line 3): a second YAML document; only the first is read, so this one would"
            + " be silently ignored: merge it into the first");
    assertThatThrownBy(() -> KvrouterConfig.parse("workers:\n  file: &b fleet.yaml\nevents:\n  walk_models: [*b]\n",
        "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessage("k.yaml: events.walk_models[0] (line 4): `*b` is a YAML alias, which would be read as the text"
            + " \"b\", not the anchored value; write the value itself");
  }

  /**
   * YAML 1.1 reads 0x1F40 as 8000, 017 as 15 and 1_000 as 1000: the router listened on a port, waited an interval,
   * the file never spelled in decimal. Each is an error naming the path and line, as in workers.yaml.
   */
  @Test
  void numbersInAnotherBaseOrNotationAreErrorsNamingPathAndLine() {
    assertThatThrownBy(() -> KvrouterConfig.parse("server:\n  ext_proc_port: 0x1F40\n", "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessage("k.yaml: server.ext_proc_port (line 2): `0x1F40` is not a plain decimal number (YAML reads it as"
            + " 8000); write the number in decimal");
    assertThatThrownBy(() -> KvrouterConfig.parse("""
        limits: {retry_after_seconds: 017}
        workers: {poll_interval_ms: 1_000}
        routing: {weights: {gpu_credit: +2}, models: {m: {busy: {max_waiting_requests: 0b11}}}}
        """, "k.yaml"))
        .hasMessageContaining("k.yaml: limits.retry_after_seconds (line 1): `017` is not a plain decimal number"
            + " (YAML reads it as 15)")
        .hasMessageContaining("k.yaml: workers.poll_interval_ms (line 2): `1_000` is not a plain decimal number")
        .hasMessageContaining("k.yaml: routing.weights.gpu_credit (line 3): `+2` is not a plain decimal number")
        .hasMessageContaining("k.yaml: routing.models.m.busy.max_waiting_requests (line 3): `0b11` is not a plain");
    // what stays accepted: plain decimals, negative where allowed, quoted strings that look like numbers
    KvrouterConfig c = KvrouterConfig.parse("server: {ext_proc_port: 8000}\nrouting: {weights: {temperature: 0}}\n"
        + "tenancy: {header: \"017\"}\n", "k.yaml");
    assertThat(c.server().extProcPort()).isEqualTo(8000);
    assertThat(c.tenancy().header()).isEqualTo("017");
  }

  /** YAML 1.1 reads 1_0.5 as 10.5 and +.5 as 0.5: a decimal is taken only as written, like a whole number. */
  @Test
  void decimalsInYamlElevenNotationAreErrorsNamingPathAndLine() {
    assertThatThrownBy(() -> KvrouterConfig.parse("routing:\n  weights: {temperature: 1_0.5, gpu_credit: +.5}\n",
        "k.yaml"))
        .hasMessageContaining("k.yaml: routing.weights.temperature (line 2): `1_0.5` is not a plain decimal number"
            + " (YAML reads it as 10.5)")
        .hasMessageContaining("k.yaml: routing.weights.gpu_credit (line 2): `+.5` is not a plain decimal number");
    KvrouterConfig c = KvrouterConfig.parse("routing: {weights: {temperature: 0.25, gpu_credit: 1.5}}\n",
        "k.yaml");
    assertThat(c.routing().weights().temperature()).isEqualTo(0.25);
    assertThat(c.routing().weights().gpuCredit()).isEqualTo(1.5);
  }

  /**
   * A wrongly typed value is reported and removed, so it takes its default: a check comparing it with another
   * setting must not then report the other against that default, which the file never said.
   */
  @Test
  void aRemovedValueIsNotComparedAsItsDefault() {
    assertThatThrownBy(() -> KvrouterConfig.parse("routing: {health: {eject_seconds: lots, eject_max_seconds: 3}}\n",
        "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessage("k.yaml: routing.health.eject_seconds: must be a whole number, was string \"lots\"");
    assertThatThrownBy(() -> KvrouterConfig.parse("replicas: {bind: [a], peers: ['tcp://b:5601']}\n", "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessage("k.yaml: replicas.bind: must be a string, was a list");
    // a valid pair is still compared
    assertThatThrownBy(() -> KvrouterConfig.parse("routing: {health: {eject_seconds: 9, eject_max_seconds: 3}}\n",
        "k.yaml"))
        .hasMessage("k.yaml: routing.health.eject_max_seconds: must be >= eject_seconds (9)");
  }

  @Test
  void wrongTypesNameTheirPath() {
    assertThatThrownBy(() -> KvrouterConfig.parse("server: {ext_proc_port: lots}", "k.yaml"))
        .hasMessageStartingWith("k.yaml: server.ext_proc_port:");
  }
}
