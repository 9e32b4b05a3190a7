package dev.kvrouter.extproc.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ModelRegistryTest {

  @TempDir
  Path dir;

  final SimpleMeterRegistry meters = new SimpleMeterRegistry();
  final AtomicLong clock = new AtomicLong();
  /** Loads run only when the test drains this queue, so every intermediate state is observable. */
  final ConcurrentLinkedQueue<Runnable> queued = new ConcurrentLinkedQueue<>();
  final AtomicInteger loads = new AtomicInteger();

  /** What the test's loader does on its next call. */
  volatile Exception failWith;

  record Loaded(ModelSpec spec, ModelFiles files, AtomicInteger closed) implements ModelResources {
    @Override
    public void close() {
      closed.incrementAndGet();
    }
  }

  final ModelResourcesLoader loader = (spec, files) -> {
    loads.incrementAndGet();
    if (failWith != null) {
      throw failWith;
    }
    return new Loaded(spec, files, new AtomicInteger());
  };

  @BeforeEach
  void tokenizerFiles() throws Exception {
    Files.createDirectories(dir.resolve("qwen"));
    Files.writeString(dir.resolve("qwen/tokenizer.json"), "{}");
    Files.writeString(dir.resolve("qwen/tokenizer_config.json"), "{}");
    Files.createDirectories(dir.resolve("hf"));
    Files.writeString(dir.resolve("hf/tokenizer.json"), "{}");
    Files.writeString(dir.resolve("hf/chat_template.jinja"), "{{ messages }}");
    Files.writeString(dir.resolve("override.jinja"), "{{ x }}");
  }

  ModelRegistry registry(List<ModelSpec> specs) {
    return ModelRegistry.create(specs, dir, loader, queued::add, clock::get, meters);
  }

  void runLoads() {
    Runnable r;
    while ((r = queued.poll()) != null) {
      r.run();
    }
  }

  double fallbacks(String reason, String model) {
    var c = meters.find("kvrouter.model.fallback").tag("reason", reason).tag("model", model).counter();
    return c == null ? 0 : c.count();
  }

  static ModelSpec spec(String name, String tokenizer, List<String> adapters, Boolean share) {
    return new ModelSpec(name, tokenizer, null, null, null, adapters,
        share == null ? null : new ModelSpec.Tenancy(share), null);
  }

  /**
   * A router whose preloaded models are still loading routes their requests by load alone ({@code model_loading}),
   * and its admin /health said 200 all the while: an orchestrator rolling the replicas moved on to the next one while
   * this one could not yet reproduce a prompt. Preloaded once every preloaded model's first load has ended, loaded or
   * failed (a failure is retried in the background and must not take readiness back); a model not preloaded, or without
   * a tokenizer, never holds it.
   */
  @Test
  void preloadedOnceEveryPreloadedModelsFirstLoadHasEnded() {
    ModelRegistry r = registry(List.of(spec("a", "qwen", List.of(), null), spec("b", "hf", List.of(), null),
        new ModelSpec("lazy", "qwen", null, null, null, List.of(), null, false), spec("plain", null, List.of(), null)));
    assertThat(r.preloaded()).as("nothing loaded yet").isFalse();
    r.preload();
    assertThat(r.preloaded()).isFalse();
    queued.poll().run();
    assertThat(r.preloaded()).as("b still loading").isFalse();
    failWith = new java.io.IOException("unreadable");
    queued.poll().run();
    assertThat(queued).as("the lazy model is not loaded").isEmpty();
    assertThat(r.preloaded()).as("a loaded, b failed").isTrue();
    clock.addAndGet(java.time.Duration.ofMinutes(1).toNanos());
    r.resolve("b"); // its retry starts
    assertThat(r.preloaded()).as("while b is retried").isTrue();
  }

  @Test
  void valueProblemsAreAllReportedWithTheirPaths() {
    List<String> problems = ModelSpecs.validate(List.of(
        new ModelSpec("a", "qwen", null, null, 0, List.of("lora-1", ""), null, null),
        new ModelSpec("a", null, "cfg.json", "t.jinja", 100_000, List.of("lora-1", "b"), null, null),
        new ModelSpec("b", " ", null, null, null, null, null, null),
        new ModelSpec(null, null, null, null, null, null, null, null)));
    assertThat(problems).containsExactlyInAnyOrder(
        "models[0].block_size: must be 1..8192 (vLLM's default is 16)",
        "models[0].adapters[1]: must be a non-empty name",
        "models[1].name: `a` is already declared at models[0].name (model and adapter names share one namespace,"
            + " as in vLLM's /v1/models)",
        "models[1].tokenizer_config: needs `tokenizer`",
        "models[1].chat_template: needs `tokenizer`",
        "models[1].block_size: must be 1..8192 (vLLM's default is 16)",
        "models[1].adapters[0]: `lora-1` is already declared at models[0].adapters[0] (model and adapter names share"
            + " one namespace, as in vLLM's /v1/models)",
        "models[2].name: `b` is already declared at models[1].adapters[1] (model and adapter names share one"
            + " namespace, as in vLLM's /v1/models)",
        "models[2].tokenizer: must be a path (leave it out for a model without a tokenizer)",
        "models[3].name: required");
  }

  @Test
  void missingFilesAreReportedAtCreationAllAtOnce() {
    InvalidModelConfig e = catchThrowableOfType(InvalidModelConfig.class, () -> registry(List.of(
        ModelSpec.of("a", "nowhere"),
        ModelSpec.of("b", "."), // a directory without tokenizer.json
        new ModelSpec("c", "qwen", "missing.json", null, null, null, null, null),
        new ModelSpec("d", "qwen", null, "missing.jinja", null, null, null, null))));
    assertThat(e.problems()).hasSize(4);
    assertThat(e.problems().get(0)).startsWith("models[0].tokenizer: ").endsWith("nowhere does not exist");
    assertThat(e.problems().get(1)).startsWith("models[1].tokenizer: directory ").endsWith("has no tokenizer.json");
    assertThat(e.problems().get(2)).startsWith("models[2].tokenizer_config: ").endsWith("is not a readable file");
    assertThat(e.problems().get(3)).startsWith("models[3].chat_template: ").endsWith("is not a readable file");
  }

  @Test
  void filesResolveFromADirectoryAFileOrOverrides() {
    List<String> problems = new ArrayList<>();
    ModelFiles qwen = ModelSpecs.resolveFiles(ModelSpec.of("q", "qwen"), "m", dir, problems);
    assertThat(qwen).isEqualTo(new ModelFiles(dir.resolve("qwen/tokenizer.json"),
        dir.resolve("qwen/tokenizer_config.json"), null, false));
    ModelFiles hf = ModelSpecs.resolveFiles(ModelSpec.of("h", "hf/tokenizer.json"), "m", dir, problems);
    assertThat(hf).isEqualTo(new ModelFiles(dir.resolve("hf/tokenizer.json"), null,
        dir.resolve("hf/chat_template.jinja"), false));
    ModelFiles over = ModelSpecs.resolveFiles(new ModelSpec("o", "hf", "qwen/tokenizer_config.json",
        "override.jinja", null, null, null, null), "m", dir, problems);
    assertThat(over).isEqualTo(new ModelFiles(dir.resolve("hf/tokenizer.json"),
        dir.resolve("qwen/tokenizer_config.json"), dir.resolve("override.jinja"), true));
    assertThat(problems).isEmpty();
  }

  @Test
  void theFetchedTokenizerPackagesResolve() {
    Path root = Path.of(System.getProperty("kvrouter.root", "..")).toAbsolutePath().normalize();
    for (String name : List.of("qwen3", "llama3_1", "deepseek_v3", "gemma3")) {
      Path tok = root.resolve(".cache/tokenizers").resolve(name);
      assertThat(tok.resolve("tokenizer.json"))
          .as("%s is missing: run scripts/fetch-tokenizers.sh", tok.resolve("tokenizer.json")).isRegularFile();
      List<String> problems = new ArrayList<>();
      ModelFiles f = ModelSpecs.resolveFiles(ModelSpec.of(name, tok.toString()), "m", dir, problems);
      assertThat(problems).isEmpty();
      assertThat(f.tokenizerConfig()).isEqualTo(tok.resolve("tokenizer_config.json"));
    }
  }

  @Test
  void baseModelsAndAdaptersResolveToTheBaseWithTheAdapterNamed() {
    ModelRegistry r = registry(List.of(
        new ModelSpec("qwen", "qwen", null, null, 32, List.of("sql-lora"), new ModelSpec.Tenancy(true), null)));
    ModelResolution base = r.resolve("qwen");
    assertThat(base.known()).isTrue();
    assertThat(base.baseModel()).isEqualTo("qwen");
    assertThat(base.adapter()).isNull();
    assertThat(base.blockSize()).isEqualTo(32);
    assertThat(base.shareAcrossTenants()).isTrue();
    ModelResolution lora = r.resolve("sql-lora");
    assertThat(lora.baseModel()).isEqualTo("qwen");
    assertThat(lora.adapter()).isEqualTo("sql-lora");
    assertThat(lora.spec()).isSameAs(base.spec());
  }

  @Test
  void anUnknownModelIsNotAnErrorButAVisibleCountedFallback() {
    ModelRegistry r = registry(List.of(ModelSpec.of("qwen", "qwen")));
    ModelResolution u = r.resolve("client-chosen-name");
    assertThat(u.known()).isFalse();
    assertThat(u.fallback()).isEqualTo("unknown_model");
    assertThat(u.baseModel()).isEqualTo("client-chosen-name");
    assertThat(u.blockSize()).isEqualTo(16);
    r.resolve("another-name");
    // client-chosen names never become label values
    assertThat(fallbacks("unknown_model", ModelRegistry.UNKNOWN_LABEL)).isEqualTo(2);
    assertThat(meters.find("kvrouter.model.fallback").tag("model", "client-chosen-name").counter()).isNull();
  }

  @Test
  void resourcesLoadLazilyOnceOffTheRequestThread() {
    ModelRegistry r = registry(List.of(ModelSpec.of("qwen", "qwen")));
    assertThat(loads.get()).isZero();
    ModelResolution first = r.resolve("qwen");
    assertThat(first.fallback()).isEqualTo("model_loading");
    assertThat(r.resolve("qwen").fallback()).isEqualTo("model_loading");
    assertThat(queued).hasSize(1); // one load queued however many requests ask
    assertThat(loads.get()).isZero(); // and none ran on the request thread
    runLoads();
    ModelResolution ready = r.resolve("qwen");
    assertThat(ready.fallback()).isNull();
    assertThat(ready.resources(Loaded.class)).get().extracting(l -> l.files().tokenizerJson())
        .isEqualTo(dir.resolve("qwen/tokenizer.json"));
    assertThat(ready.resources(OtherResources.class)).isEmpty();
    assertThat(loads.get()).isEqualTo(1);
    assertThat(fallbacks("model_loading", "qwen")).isEqualTo(2);
  }

  record OtherResources() implements ModelResources {}

  @Test
  void aFailedLoadFallsBackAndIsRetriedOnlyAfterTheBackOff() {
    ModelRegistry r = registry(List.of(ModelSpec.of("qwen", "qwen")));
    failWith = new IllegalStateException("bad tokenizer.json");
    r.resolve("qwen");
    runLoads();
    ModelResolution failed = r.resolve("qwen");
    assertThat(failed.fallback()).isEqualTo("model_load_failed");
    assertThat(((ResourceState.Failed) failed.resources()).detail()).isEqualTo(
        "IllegalStateException: bad tokenizer.json");
    clock.addAndGet(ModelRegistry.RETRY_AFTER.toNanos() - 1);
    assertThat(r.resolve("qwen").fallback()).isEqualTo("model_load_failed");
    assertThat(queued).isEmpty();
    failWith = null;
    clock.addAndGet(1);
    assertThat(r.resolve("qwen").fallback()).isEqualTo("model_loading");
    runLoads();
    assertThat(r.resolve("qwen").fallback()).isNull();
    assertThat(loads.get()).isEqualTo(2);
    assertThat(fallbacks("model_load_failed", "qwen")).isEqualTo(2);
  }

  @Test
  void aModelWithoutTokenizerIsRoutedByLoadWithItsReason() {
    ModelRegistry r = registry(List.of(spec("plain", null, List.of("ad"), null)));
    assertThat(r.resolve("plain").fallback()).isEqualTo("no_tokenizer");
    assertThat(r.resolve("ad").adapter()).isEqualTo("ad");
    r.preload();
    assertThat(queued).isEmpty();
  }

  @Test
  void preloadStartsOnlyModelsThatAskForIt() {
    ModelRegistry r = registry(List.of(ModelSpec.of("a", "qwen"),
        new ModelSpec("b", "hf", null, null, null, null, null, false)));
    r.preload();
    runLoads();
    assertThat(loads.get()).isEqualTo(1);
    assertThat(r.resolve("a").fallback()).isNull();
    assertThat(r.resolve("b").fallback()).isEqualTo("model_loading");
  }

  @Test
  void concurrentFirstRequestsStartExactlyOneLoad() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    ExecutorService loaderPool = Executors.newSingleThreadExecutor();
    ExecutorService requests = Executors.newFixedThreadPool(8);
    try {
      ModelRegistry r = ModelRegistry.create(List.of(ModelSpec.of("qwen", "qwen")), dir, (spec, files) -> {
        loads.incrementAndGet();
        release.await(10, TimeUnit.SECONDS);
        return new Loaded(spec, files, new AtomicInteger());
      }, loaderPool, System::nanoTime, meters);
      CountDownLatch go = new CountDownLatch(1);
      List<Future<String>> fs = new ArrayList<>();
      for (int i = 0; i < 64; i++) {
        fs.add(requests.submit(() -> {
          go.await(10, TimeUnit.SECONDS);
          return String.valueOf(r.resolve("qwen").fallback());
        }));
      }
      go.countDown();
      for (Future<String> f : fs) {
        assertThat(f.get(10, TimeUnit.SECONDS)).isEqualTo("model_loading");
      }
      release.countDown();
      assertThat(r.await("qwen", Duration.ofSeconds(10))).isInstanceOf(ResourceState.Ready.class);
      assertThat(loads.get()).isEqualTo(1);
    } finally {
      requests.shutdownNow();
      loaderPool.shutdownNow();
      assertThat(requests.awaitTermination(5, TimeUnit.SECONDS)).isTrue();
      assertThat(loaderPool.awaitTermination(5, TimeUnit.SECONDS)).isTrue();
    }
  }

  @Test
  void closeReleasesLoadedResourcesAndLateLoadsReleaseTheirs() {
    ModelRegistry r = registry(List.of(ModelSpec.of("a", "qwen"), ModelSpec.of("b", "hf")));
    r.resolve("a");
    runLoads();
    Loaded a = r.resolve("a").resources(Loaded.class).orElseThrow();
    r.resolve("b"); // queued, finishes after close
    r.close();
    assertThat(a.closed().get()).isEqualTo(1);
    runLoads();
    assertThat(((ResourceState.Ready) r.resolve("b").resources()).resources()).isInstanceOfSatisfying(Loaded.class,
        b -> assertThat(b.closed().get()).isEqualTo(1));
  }

  @Test
  void aRejectedLoadIsAFailureNotACrash() {
    ModelRegistry r = ModelRegistry.create(List.of(ModelSpec.of("a", "qwen")), dir, loader, cmd -> {
      throw new java.util.concurrent.RejectedExecutionException("shut down");
    }, clock::get, meters);
    assertThat(r.resolve("a").fallback()).isEqualTo("model_loading");
    assertThat(r.resolve("a").fallback()).isEqualTo("model_load_failed");
  }

  @Test
  void anEmptyRegistryKnowsNothing() {
    ModelRegistry r = ModelRegistry.empty(meters);
    assertThat(r.resolve("anything").fallback()).isEqualTo("unknown_model");
    assertThat(r.specs()).isEmpty();
    assertThatThrownBy(() -> ModelRegistry.create(List.of(ModelSpec.of("", "x")), dir, loader, Runnable::run,
        clock::get, meters)).isInstanceOf(InvalidModelConfig.class).hasMessage("models[0].name: required");
  }
}
