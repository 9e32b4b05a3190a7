package dev.kvrouter.extproc.tokenize;

import java.io.IOException;
import java.nio.file.Path;

/**
 * DJL segment encoder loaded on first use: the pure-Java tokenizer's escape hatch for the rare segment
 * Java's Unicode tables cannot normalize exactly, without paying DJL's memory for every model up front.
 * Thread-safe (double-checked load).
 */
final class LazyDjlSegmentEncoder implements SegmentEncoder, AutoCloseable {
  private final Path dir;
  private volatile DjlEngine engine;
  private boolean closed;

  LazyDjlSegmentEncoder(Path dir) {
    this.dir = dir;
  }

  private DjlEngine engine() {
    DjlEngine e = engine;
    if (e == null) {
      synchronized (this) {
        if (closed) {
          throw new TokenizationException("tokenizer is closed");
        }
        e = engine;
        if (e == null) {
          try {
            e = DjlEngine.load(dir);
          } catch (IOException | RuntimeException | UnsatisfiedLinkError ex) {
            throw new TokenizationException("cannot load the DJL fallback tokenizer", ex);
          }
          engine = e;
        }
      }
    }
    return e;
  }

  @Override
  public Job begin(CharSequence text, int start, int end, Scratch scratch) {
    return new DjlSegmentEncoder(engine()).begin(text, start, end, scratch);
  }

  @Override
  public synchronized void close() {
    closed = true;
    if (engine != null) {
      engine.close();
      engine = null;
    }
  }
}
