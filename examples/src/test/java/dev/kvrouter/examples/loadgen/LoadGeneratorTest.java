package dev.kvrouter.examples.loadgen;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.fake.FakeWorker;
import dev.kvrouter.examples.report.PolicyResult;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.report.RunData;
import dev.kvrouter.examples.report.WorkerCounters;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import java.net.ServerSocket;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(30)
class LoadGeneratorTest {

  private static LoadConfig config(URI target) {
    return LoadConfig.defaults(target, "test/model").withTimeouts(Duration.ofSeconds(10), Duration.ofSeconds(10))
        .withSampleInterval(Duration.ofMillis(40));
  }

  /** The first exchanges of a fresh JDK client and server take hundreds of ms (class loading, JIT). */
  private static void warmUp(LoadGenerator gen) throws InterruptedException {
    gen.run(WorkloadCatalog.create("unique:count=2,prompt=8,output=2"), RunContext.builder("warm-up").build());
  }

  @Test
  void measuresTtftItlAndUsageFromRealStreams() throws Exception {
    try (ScriptedWorker w = new ScriptedWorker("s1", 80, 20, 48);
        LoadGenerator gen = new LoadGenerator(config(w.uri()))) {
      warmUp(gen);
      for (String spec : List.of("unique:count=4,rate=20,arrival=uniform,prompt=100,output=5",
          "system-prompt:count=4,rate=20,arrival=uniform,prompt=100,sharing=0.5,output=5")) {
        Workload wl = WorkloadCatalog.create(spec);
        RunData run = gen.run(wl, RunContext.builder("p").workers(List.of(w.target())).build());
        assertThat(run.requests()).hasSize(4);
        for (RequestRecord r : run.requests()) {
          assertThat(r.error()).as(spec).isNull();
          assertThat(r.status()).isEqualTo(200);
          // lower bounds are the worker's sleeps; the client may see chunks late (a busy machine), never early
          assertThat(r.ttftMicros()).isBetween(80_000L, 5_000_000L);
          assertThat(r.e2eMicros()).isGreaterThanOrEqualTo(Math.max(r.ttftMicros(), 80_000L + 4 * 20_000L));
          assertThat(r.contentChunks()).isEqualTo(5);
          assertThat(r.completionTokens()).isEqualTo(5);
          assertThat(r.promptTokens()).isEqualTo(100); // token ids, or words of the chat messages
          assertThat(r.cachedTokens()).isEqualTo(48);
          assertThat(r.servedBy()).isEqualTo("s1");
          assertThat(r.decisionId()).startsWith("d-");
          assertThat(r.itlMaxMicros()).isPositive();
        }
        assertThat(run.itlMicros().getTotalCount()).isEqualTo(4 * 4);
        WorkerCounters c = run.counters().get("s1");
        assertThat(c.promptTokens()).isEqualTo(400);
        assertThat(c.prefixCacheHits()).isEqualTo(4 * 48);
        assertThat(c.requestSuccess()).isEqualTo(4);
        assertThat(run.load()).isNotEmpty();
        assertThat(run.load().stream().mapToDouble(s -> s.running()).max().orElse(0)).isGreaterThan(0);
        PolicyResult p = PolicyResult.summarize(run, wl.idealReuse(16));
        assertThat(p.cache().source()).isEqualTo("vllm");
        assertThat(p.cache().servedShare()).isEqualTo(0.48);
        assertThat(p.cache().usageServedShare()).isEqualTo(0.48);
        assertThat(p.ttftMs().count()).isEqualTo(4);
      }
    }
  }

  @Test
  void modelAnswersFromAWorkerThatPicksItsOwnTokensAreFreshInEffectAndTheNotesSaySo() throws Exception {
    try (ScriptedWorker w = new ScriptedWorker("s1", 5, 1, 0);
        LoadGenerator gen = new LoadGenerator(config(w.uri()))) {
      warmUp(gen);
      Workload wl = WorkloadCatalog.create("multi-turn:format=tokens,sessions=3,rate=20,turns=2..3,think=0.05,"
          + "system=16,user=8,output=4");
      assertThat(wl.scriptsAnswers()).isTrue();
      RunData run = gen.run(wl, RunContext.builder("p").workers(List.of(w.target())).build());
      assertThat(run.requests()).hasSize(wl.size());
      assertThat(run.requests()).allSatisfy(r -> assertThat(r.error()).isNull());
      // the worker streams " t<i>", not the scripted token ids: the resent answers are not the model's own
      assertThat(run.notes()).anySatisfy(n -> assertThat(n).contains("0 of " + wl.size() + " streamed answers were "
          + "the scripted tokens").contains("fresh in effect"));
      assertThat(run.notes()).anySatisfy(n -> assertThat(n).startsWith("closed loop: "));
      RunData fresh = gen.run(WorkloadCatalog.create("multi-turn:format=tokens,sessions=3,rate=20,turns=2..3,"
          + "think=0.05,system=16,user=8,output=4,answers=fresh"), RunContext.builder("p").workers(List.of(w.target()))
          .build());
      // open loop, no scripted answers: nothing to say
      assertThat(fresh.notes()).noneSatisfy(n -> assertThat(n).containsAnyOf("fresh in effect", "closed loop"));
    }
  }

  @Test
  void arrivalsAreHonouredWhateverTheResponses() throws Exception {
    try (FakeWorker w = new FakeWorker("f1", "test/model", 5).start("127.0.0.1", 0);
        LoadGenerator gen = new LoadGenerator(config(URI.create("http://127.0.0.1:" + w.port())))) {
      warmUp(gen);
      Workload wl = WorkloadCatalog.create("unique:count=60,rate=100,arrival=uniform,prompt=64,output=3");
      RunData run = gen.run(wl, RunContext.builder("p").build());
      long[] lag = run.requests().stream().mapToLong(r -> r.sentMicros() - r.scheduledMicros()).sorted().toArray();
      assertThat(lag[0]).isGreaterThanOrEqualTo(0);
      // the median is what the driver controls; the tail is the machine (a starved 2-core box stalls threads for
      // tens of ms), so it only has to stay far below the 10 ms spacing times the request count
      assertThat(lag[lag.length / 2]).as("median send lag, us").isLessThan(5_000);
      assertThat(lag[lag.length - 1]).as("worst send lag, us").isLessThan(250_000);
      // The schedule is 59 gaps of exactly 10 ms. Measure the last send from the first request's *scheduled*
      // time: a send is never early, so the lower bound holds however late the first send was (measuring from
      // the first send failed once when it lagged the last by 7 ms on a loaded machine).
      long firstScheduled = run.requests().get(0).scheduledMicros();
      assertThat(run.requests().get(59).scheduledMicros() - firstScheduled).isEqualTo(590_000L);
      long last = run.requests().get(59).sentMicros();
      assertThat(last - firstScheduled).isBetween(590_000L, 590_000L + 250_000);
      assertThat(run.requests()).allSatisfy(r -> {
        assertThat(r.error()).isNull();
        assertThat(r.servedBy()).isEqualTo("f1");
        assertThat(r.completionTokens()).isEqualTo(3);
        assertThat(r.cachedTokens()).isZero();
        assertThat(r.ttftMicros()).isPositive();
      });
      assertThat(run.itlMicros().getTotalCount()).isEqualTo(60 * 2);
    }
  }

  @Test
  void timedActionsHappenAtTheirOffsetOnceAndThoseDueAfterTheRunNever() throws Exception {
    try (FakeWorker w = new FakeWorker("f1", "test/model", 5).start("127.0.0.1", 0);
        LoadGenerator gen = new LoadGenerator(config(URI.create("http://127.0.0.1:" + w.port())))) {
      warmUp(gen);
      Workload wl = WorkloadCatalog.create("unique:count=30,rate=100,arrival=uniform,prompt=64,output=3");
      java.util.concurrent.atomic.AtomicLong firedAt = new java.util.concurrent.atomic.AtomicLong(-1);
      java.util.concurrent.atomic.AtomicInteger fired = new java.util.concurrent.atomic.AtomicInteger();
      java.util.concurrent.atomic.AtomicInteger late = new java.util.concurrent.atomic.AtomicInteger();
      long start = System.nanoTime();
      RunData run = gen.run(wl, RunContext.builder("p")
          .at(Duration.ofMillis(150), "crash of f1", () -> {
            firedAt.set(System.nanoTime());
            fired.incrementAndGet();
          })
          .at(Duration.ofSeconds(30), "never", late::incrementAndGet).build());
      assertThat(fired).hasValue(1);
      assertThat((firedAt.get() - start) / 1_000_000).as("ms after the run began").isBetween(150L, 1_000L);
      // the run's requests arrive over 290 ms; the 30 s action is cancelled with the run, not left to fire later
      Thread.sleep(100);
      assertThat(late).hasValue(0);
      assertThat(run.notes()).anySatisfy(n -> assertThat(n).startsWith("crash of f1 at 0.1"))
          .noneSatisfy(n -> assertThat(n).startsWith("never"));
    }
  }

  @Test
  void inFlightIsCappedAndTheOverflowCounted() throws Exception {
    try (FakeWorker w = new FakeWorker("f1", "test/model", 100).start("127.0.0.1", 0);
        LoadGenerator gen = new LoadGenerator(config(URI.create("http://127.0.0.1:" + w.port())).withMaxInFlight(5))) {
      RunData run = gen.run(WorkloadCatalog.create("best-of-n:groups=1,n=20,prompt=32,output=4"),
          RunContext.builder("p").build());
      assertThat(run.requests().stream().filter(RequestRecord::ok).count()).isEqualTo(5);
      assertThat(run.requests().stream().filter(r -> "overflow".equals(r.error())).count()).isEqualTo(15);
      assertThat(run.maxInFlight()).isEqualTo(5);
      assertThat(w.served()).isEqualTo(5);
      PolicyResult p = PolicyResult.summarize(run, null);
      assertThat(p.counts().overflow()).isEqualTo(15);
      assertThat(p.counts().sent()).isEqualTo(5);
      assertThat(p.errors()).containsExactly(Map.entry("overflow", 15L));
    }
  }

  @Test
  void manyConcurrentStreamsNeedOnlyAFewThreads() throws Exception {
    try (FakeWorker w = new FakeWorker("f1", "test/model", 10).start("127.0.0.1", 0);
        LoadGenerator gen = new LoadGenerator(config(URI.create("http://127.0.0.1:" + w.port())))) {
      RunData run = gen.run(WorkloadCatalog.create("unique:count=300,rate=1000,arrival=uniform,prompt=16,output=4"),
          RunContext.builder("p").build());
      assertThat(run.requests()).allMatch(RequestRecord::ok);
      assertThat(run.maxInFlight()).isGreaterThan(16); // more streams at once than the worker has threads
      assertThat(gen.threadsCreated()).isLessThanOrEqualTo(gen.config().clientThreads() + 1);
    }
  }

  @Test
  void failuresAreCountedNotFatal() throws Exception {
    int closed;
    try (ServerSocket s = new ServerSocket(0)) {
      closed = s.getLocalPort();
    }
    Workload wl = WorkloadCatalog.create("unique:count=3,rate=100,prompt=8,output=2");
    try (LoadGenerator gen = new LoadGenerator(config(URI.create("http://127.0.0.1:" + closed)))) {
      RunData run = gen.run(wl, RunContext.builder("p")
          .workers(List.of(WorkerTarget.of("gone", URI.create("http://127.0.0.1:" + closed)))).build());
      assertThat(run.requests()).extracting(RequestRecord::error).containsOnly("connect");
      assertThat(run.counters().get("gone")).isEqualTo(WorkerCounters.ABSENT.minus(WorkerCounters.ABSENT));
      assertThat(run.notes()).anyMatch(n -> n.contains("metrics of gone unreadable"));
      assertThat(run.notes()).anyMatch(n -> n.startsWith("request failure seen: connect"));
    }
    try (FakeWorker w = new FakeWorker("f1", "test/model", 0).start("127.0.0.1", 0);
        LoadGenerator gen = new LoadGenerator(config(URI.create("http://127.0.0.1:" + w.port() + "/nope")))) {
      RunData run = gen.run(wl, RunContext.builder("p").build());
      assertThat(run.requests()).allSatisfy(r -> {
        assertThat(r.error()).isEqualTo("http_404");
        assertThat(r.status()).isEqualTo(404);
        assertThat(r.servedBy()).isEqualTo("f1");
      });
    }
  }

  @Test
  void aStreamPastItsDeadlineTimesOut() throws Exception {
    try (ScriptedWorker w = new ScriptedWorker("slow", 5_000, 1, 0);
        LoadGenerator gen = new LoadGenerator(config(w.uri())
            .withTimeouts(Duration.ofMillis(300), Duration.ofSeconds(5)))) {
      w.ttftMillis = 0;
      warmUp(gen);
      w.ttftMillis = 2_000;
      long t = System.nanoTime();
      RunData run = gen.run(WorkloadCatalog.create("unique:count=2,rate=100,prompt=8,output=2"),
          RunContext.builder("p").build());
      assertThat((System.nanoTime() - t) / 1_000_000).isLessThan(3_000);
      assertThat(run.requests()).allSatisfy(r -> {
        assertThat(r.error()).isEqualTo("timeout");
        assertThat(r.status()).isEqualTo(200); // headers came; the body did not finish in time
        assertThat(r.e2eMicros()).isBetween(300_000L, 2_000_000L);
        assertThat(r.ttftMicros()).isEqualTo(-1);
      });
    }
  }

  @Test
  void requestCapKeepsWholeSiblingGroups() throws Exception {
    // a cap of 6 on best-of-4 cut by count sent half of the second group; rounded down, only the first group goes
    try (FakeWorker w = new FakeWorker("f1", "test/model", 0).start("127.0.0.1", 0);
        LoadGenerator gen = new LoadGenerator(config(URI.create("http://127.0.0.1:" + w.port())).withMaxRequests(6))) {
      RunData run = gen.run(WorkloadCatalog.create("best-of-n:groups=3,n=4,rate=50,prompt=8,output=1"),
          RunContext.builder("p").build());
      assertThat(run.requests()).hasSize(4);
      assertThat(w.served()).isEqualTo(4);
    }
  }

  @Test
  void runTimeCapStopsSending() throws Exception {
    try (FakeWorker w = new FakeWorker("f1", "test/model", 0).start("127.0.0.1", 0);
        LoadGenerator gen = new LoadGenerator(config(URI.create("http://127.0.0.1:" + w.port()))
            .withMaxRunTime(Duration.ofMillis(250)).withMaxRequests(8))) {
      RunData run = gen.run(WorkloadCatalog.create("unique:count=20,rate=10,arrival=uniform,prompt=8,output=1"),
          RunContext.builder("p").build());
      assertThat(run.requests()).hasSize(8);
      assertThat(run.requests()).extracting(RequestRecord::error)
          .containsExactly(null, null, null, "not_sent", "not_sent", "not_sent", "not_sent", "not_sent");
      assertThat(w.served()).isEqualTo(3);
    }
  }
}
