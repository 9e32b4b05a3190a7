package dev.kvrouter.examples.workload;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Questions about images from a shared set, as a visual-QA or document-understanding service sees them: every
 * request is a chat of one shared system prompt and a user message with 1..k images from a set of {@code images}
 * (Zipf popularity with exponent {@code zipf}, distinct images per request, in the order drawn) followed by a
 * question of its own. Each image is an {@code image_url} part with a URL of its own (never fetched) and, as
 * {@code uuid} says, the client's stable {@code uuid} for it:
 *
 * <ul>
 *   <li>{@code uuid=yes}: every image carries its uuid, so engines key its blocks by it and the router can name
 *       them from their KV events;
 *   <li>{@code uuid=no}: no uuid; engines key the image by their own hash of its content, which the router cannot
 *       compute (it never fetches media): from events it can match only the blocks before the first image;
 *   <li>{@code uuid=mixed}: each image of the set is named or not, with probability {@code uuid-share}, once for
 *       the whole run (some clients name their uploads, others do not).
 * </ul>
 *
 * <p>Ideal reuse ({@link Workload#idealReuse}) keys image blocks as the engine does ({@link ImagePart#engineIdentity}):
 * the same image at the same offset repeats with or without a uuid, since the engine hashes the same content the
 * same way. So the ideal is the same for every {@code uuid} mode, and what kv_aware falls short of it without uuids
 * is the router's blindness, not the workload's.
 *
 * <p>Chat only: the images are expanded by the model's processor, so runs need the model's request path (the
 * virtual A/B's {@code --tokenizer} with {@code --multimodal}). The {@link Workload#promptTokens} stand-in gives each
 * image {@link ImagePart#STAND_IN_TOKENS} tokens.
 *
 * <p>Options: {@code seed=1 count=400 rate=4 arrival=poisson images=64 per-request=1..2 zipf=1.1 system=256
 * question=16..64 output=32..128 uuid=yes uuid-share=0.5 vocab=1000..128000}.
 */
public final class ImageQaWorkload {

  public static final String NAME = "image-qa";

  /** Whether clients send a uuid with their images. */
  enum Uuids {
    YES,
    NO,
    MIXED;

    static Uuids parse(String s) {
      return switch (s.trim().toLowerCase(Locale.ROOT)) {
        case "yes", "true" -> YES;
        case "no", "false" -> NO;
        case "mixed" -> MIXED;
        default -> throw new IllegalArgumentException("uuid must be yes, no or mixed, was " + s);
      };
    }
  }

  /** Bound on draws for the distinct images of one request. */
  private static final int MAX_DRAWS = 1000;

  private ImageQaWorkload() {}

  public static Workload build(WorkloadOptions o) {
    long seed = o.longValue("seed", 1);
    int count = o.intValue("count", 400);
    double rate = o.doubleValue("rate", 4);
    Arrival arrival = o.arrival();
    int images = o.intValue("images", 64);
    IntRange perRequest = o.range("per-request", new IntRange(1, 2));
    double zipfExponent = o.doubleValue("zipf", 1.1);
    int system = o.intValue("system", 256);
    IntRange question = o.range("question", new IntRange(16, 64));
    IntRange output = o.range("output", new IntRange(32, 128));
    Uuids uuids = Uuids.parse(o.string("uuid", "yes"));
    double uuidShare = o.fraction("uuid-share", 0.5, 0, 1);
    TokenSpace space = o.tokenSpace();
    o.rejectUnknown(NAME);
    if (count < 0 || images < 1 || system < 0) {
      throw new IllegalArgumentException(NAME + ": count must be >= 0, images >= 1, system >= 0");
    }
    if (perRequest.min() < 1 || perRequest.max() > images) {
      throw new IllegalArgumentException(NAME + ": per-request must lie in [1, images=" + images + "], was "
          + perRequest);
    }
    Rng named = new Rng(Rng.derive(seed, 0x555549));
    ImagePart[] set = new ImagePart[images];
    for (int d = 0; d < images; d++) {
      boolean withUuid = switch (uuids) {
        case YES -> true;
        case NO -> false;
        case MIXED -> named.nextDouble() < uuidShare;
      };
      // the URL and uuid depend on the seed and the image only, never on the uuid mode: runs differ in that alone
      String tag = String.format(Locale.ROOT, "%016x-%d", Rng.derive(seed, 0x494D47), d);
      set[d] = new ImagePart("https://images.example.com/" + tag + ".png", withUuid ? "img-" + tag : null);
    }
    Zipf popularity = new Zipf(images, zipfExponent);
    Segment instructions = new Segment(Rng.derive(seed, 30), system);
    Rng rng = new Rng(Rng.derive(seed, 0x495141));
    List<WorkloadRequest> out = new ArrayList<>(count);
    long t = 0;
    for (int i = 0; i < count; i++) {
      if (i > 0) {
        t += arrival.nextGapMicros(rng, rate);
      }
      int k = perRequest.draw(rng);
      List<Integer> chosen = new ArrayList<>(k);
      for (int draws = 0; chosen.size() < k; draws++) {
        int d = draws < MAX_DRAWS ? popularity.sample(rng) : firstUnused(chosen, images);
        if (!chosen.contains(d)) {
          chosen.add(d);
        }
      }
      List<ImagePart> parts = new ArrayList<>(k);
      for (int d : chosen) {
        parts.add(set[d]);
      }
      Segment q = new Segment(Rng.derive(seed, 31, i), Math.max(1, question.draw(rng)));
      Prompt p = Prompt.chat(List.of(Message.of("system", instructions),
          new Message("user", parts, List.of(q))));
      out.add(new WorkloadRequest(i, NAME + "-" + i, t, "image-" + chosen.get(0), p,
          Math.max(1, output.draw(rng))));
    }
    return new Workload(NAME, o.effective(), space, out);
  }

  private static int firstUnused(List<Integer> chosen, int images) {
    for (int d = 0; d < images; d++) {
      if (!chosen.contains(d)) {
        return d;
      }
    }
    throw new IllegalStateException("no unused image");
  }
}
