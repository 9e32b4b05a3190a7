package dev.kvrouter.extproc.routing;

import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.PrefixCursor;
import dev.kvrouter.index.PrefixMatches;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.WorkerView;
import dev.kvrouter.index.media.MediaIdentities;
import java.util.List;

/**
 * The router's view of the {@link KvIndex}: per worker, the leading blocks of a request held by tier (from
 * engine events), the blocks covered by the router's own recent decisions (predicted entries), and whether the
 * worker's event view is stale.
 *
 * <p>Lookups only read the index. Each request thread keeps one {@link PrefixCursor}; the matches of one lookup
 * are owned by the returned {@link Lookup}, because the policy reads them after the lookup returns.
 */
public final class KvIndexOverlapSource implements PrefixOverlapSource {

  private static final Overlap STALE_NOTHING = new Overlap(0, 0, 0, 0, true);

  private final KvIndex index;
  private final ThreadLocal<PrefixCursor> cursors;
  /** Separate from {@link #cursors}: a matcher's cursor lives across the tokenizer's steps. */
  private final ThreadLocal<PrefixCursor> matchers;

  public KvIndexOverlapSource(KvIndex index) {
    this.index = index;
    this.cursors = ThreadLocal.withInitial(index::newCursor);
    this.matchers = ThreadLocal.withInitial(index::newCursor);
  }

  @Override
  public long cacheResets() {
    return index.cacheResets();
  }

  @Override
  public Matcher matcher() {
    PrefixCursor c = matchers.get();
    c.reset();
    return c::advance;
  }

  @Override
  public Lookup lookup(long[] blockHashes) {
    PrefixMatches m = new PrefixMatches();
    index.lookup(cursors.get(), blockHashes, blockHashes.length, m);
    if (m.size() == 0) {
      return this::nothingHeld;
    }
    return worker -> {
      int i = m.indexOf(worker);
      if (i < 0) {
        return nothingHeld(worker);
      }
      return new Overlap(m.gpuBlocks(i), m.cpuBlocks(i), m.diskBlocks(i), m.predictedBlocks(i), m.stale(i));
    };
  }

  /** A worker holding none of the prefix still reports its stale flag, so the decision can say why. */
  private Overlap nothingHeld(WorkerId worker) {
    WorkerView v = index.view(worker);
    return v != null && v.stale() ? STALE_NOTHING : Overlap.NONE;
  }

  @Override
  public void recordPrediction(WorkerId worker, long[] blockHashes) {
    index.predict(worker, blockHashes, blockHashes.length);
  }

  @Override
  public String learnedMediaId(long namespace, String routerId) {
    return index.media().engineId(namespace, routerId);
  }

  @Override
  public void expectMedia(WorkerId worker, long parent, int offset, long namespace, String routerId,
      List<MediaIdentities.FollowUp> rest) {
    index.media().expect(worker, parent, offset, namespace, routerId, rest);
  }
}
