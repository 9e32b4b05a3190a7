package dev.kvrouter.bench.pipeline;

import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.model.ModelSpec;
import dev.kvrouter.extproc.model.MultimodalSpec;
import dev.kvrouter.extproc.model.ResourceState;
import dev.kvrouter.extproc.pipeline.PipelineResources;
import dev.kvrouter.extproc.pipeline.PromptPipeline;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.MultimodalItem;
import dev.kvrouter.extproc.request.PreparedRequest;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.routing.KvIndexOverlapSource;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.extproc.tenancy.TenantIsolation;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.WorkerId;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * A media request to block hashes (Gemma 3, images expanded to 256 soft tokens each, every block hashed with its
 * items' keys) beside the same conversation with its images left out, in the same run: what the expansion costs
 * on top of the text path. Each request carries a fresh last message, so its tail is tokenized anew. {@code uuid}:
 * {@code yes}, every image carries the client's uuid; {@code learned}, none does and each one's engine identifier
 * has been learned (the request path looks each up in the index's learned map and hashes with it).
 *
 * <pre>
 * flock /tmp/kvrouter-bench.lock java -Dkvrouter.root=$PWD -jar bench/target/benchmarks.jar MultimodalRequest \
 *     -rf json -rff bench/results/multimodal-request.json
 * </pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 2, time = 3)
@Measurement(iterations = 4, time = 3)
@Fork(1)
public class MultimodalRequestBenchmark {

  @Param({"1", "4"})
  public int images;

  @Param({"yes"})
  public String uuid;

  private ModelRegistry registry;
  private RequestPreparer preparer;
  private PromptPipeline pipeline;
  private long unique;

  @Setup
  public void setup() throws Exception {
    Path dir = Path.of(System.getProperty("kvrouter.root", ".")).resolve(".cache/tokenizers/gemma3");
    registry = ModelRegistry.create(List.of(new ModelSpec("gemma3", dir.resolve("tokenizer.json").toString(),
            dir.resolve("tokenizer_config.json").toString(), null, 16, List.of(), null, true,
            new MultimodalSpec("gemma3", null, null, null, null))), dir,
        PipelineResources.loader(SegmentCache.create(SegmentCache.DEFAULT_MAX_TOKENS), Clock.systemUTC()),
        Executors.newSingleThreadExecutor(), System::nanoTime, new SimpleMeterRegistry());
    registry.preload();
    if (!(registry.await("gemma3", Duration.ofSeconds(60)) instanceof ResourceState.Ready)) {
      throw new IllegalStateException("model did not load");
    }
    preparer = new RequestPreparer(registry, TenantIsolation.defaults(), System::nanoTime);
    PrefixOverlapSource overlaps = PrefixOverlapSource.NONE;
    if (uuid.equals("learned")) {
      KvIndex index = new KvIndex(IndexConfig.defaults(), Clock.systemUTC());
      byte[] b = body(true).getBytes(StandardCharsets.UTF_8);
      PreparedRequest p = preparer.prepare(InferenceRequest.Kind.CHAT, b, b.length, null);
      long ns = p.scope().namespace().rootSeed();
      WorkerId w = WorkerId.of("w");
      for (MultimodalItem item : p.request().multimodal()) {
        index.media().expect(w, item.index(), 0, ns, item.identifier(), List.of());
        index.media().observe(w, item.index(), new String[] {"engine-" + item.index()}, new int[] {0}, 1);
      }
      overlaps = new KvIndexOverlapSource(index);
    } else if (!uuid.equals("yes")) {
      throw new IllegalArgumentException("uuid must be yes or learned, was " + uuid);
    }
    pipeline = new PromptPipeline(overlaps, Runnable::run, System::nanoTime, false, new SimpleMeterRegistry());
    PromptPipeline.Outcome o = run(true);
    if (o.prompt() == null) {
      throw new IllegalStateException("media request not reproduced: " + o.unavailable());
    }
    System.out.printf("%n[%d images] %d tokens, %d blocks; text only %d tokens%n", images, o.prompt().tokens(),
        o.prompt().blockHashes().length, run(false).prompt().tokens());
  }

  @TearDown
  public void close() {
    registry.close();
  }

  private PromptPipeline.Outcome run(boolean withImages) throws Exception {
    byte[] b = body(withImages).getBytes(StandardCharsets.UTF_8);
    return pipeline.run(preparer.prepare(InferenceRequest.Kind.CHAT, b, b.length, null));
  }

  private String body(boolean withImages) {
    StringBuilder parts = new StringBuilder();
    for (int i = 0; i < images; i++) {
      parts.append("{\"type\":\"text\",\"text\":\"Figure ").append(i).append(" shows the router's cache hit rate per "
          + "worker over an hour of traffic, with the queue depth beside it.\"},");
      if (withImages) {
        parts.append("{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://example.com/fig").append(i)
            .append(".png\"}").append(uuid.equals("yes") ? ",\"uuid\":\"fig-" + i + "\"}," : "},");
      }
    }
    parts.append("{\"type\":\"text\",\"text\":\"Question ").append(unique++).append(": what changed?\"}");
    return "{\"model\":\"gemma3\",\"messages\":[{\"role\":\"system\",\"content\":\"You read charts.\"},"
        + "{\"role\":\"user\",\"content\":[" + parts + "]}]}";
  }

  @Benchmark
  public PromptPipeline.Outcome withImages() throws Exception {
    return run(true);
  }

  @Benchmark
  public PromptPipeline.Outcome textOnly() throws Exception {
    return run(false);
  }
}
