package dev.kvrouter.examples.sim.testing;

import dev.kvrouter.examples.sim.engine.RequestFailure;
import dev.kvrouter.examples.sim.engine.RequestObserver;
import dev.kvrouter.examples.sim.engine.RequestOutcome;
import java.util.ArrayList;
import java.util.List;

/** Records what the engine reports for one request; the engine calls it on its owner thread only. */
public final class RecordingObserver implements RequestObserver {

  public final List<Integer> tokens = new ArrayList<>();
  public final List<Long> tokenTimes = new ArrayList<>();
  public volatile RequestOutcome outcome;
  public volatile RequestFailure failure;
  public int cachedTokensAtFirstToken = -1;

  public boolean accepted;
  public boolean sawLast;

  @Override
  public void onAccepted() {
    accepted = true;
  }

  @Override
  public synchronized void onToken(int tokenId, int index, long atNanos, int cachedTokens, boolean last) {
    if (sawLast) {
      throw new AssertionError("token after the last one");
    }
    sawLast = last;
    if (index != tokens.size()) {
      throw new AssertionError("token index " + index + " but " + tokens.size() + " delivered");
    }
    if (outcome != null || failure != null) {
      throw new AssertionError("token after the end");
    }
    if (index == 0) {
      cachedTokensAtFirstToken = cachedTokens;
    }
    tokens.add(tokenId);
    tokenTimes.add(atNanos);
  }

  @Override
  public void onFinished(RequestOutcome o) {
    if (outcome != null || failure != null) {
      throw new AssertionError("second end");
    }
    if (!sawLast || !accepted) {
      throw new AssertionError("finished without being accepted or without a last token");
    }
    outcome = o;
  }

  @Override
  public void onFailed(RequestFailure f) {
    if (outcome != null || failure != null) {
      throw new AssertionError("second end");
    }
    failure = f;
  }

  public boolean done() {
    return outcome != null || failure != null;
  }
}
