package dev.kvrouter.extproc.load;

import dev.kvrouter.index.WorkerId;

/** Latest worker-reported load per cache owner; implemented by {@link MetricsScraper}. */
@FunctionalInterface
public interface ScrapedLoadSource {

  ScrapedLoadSource NONE = id -> null;

  /** The latest scrape of {@code worker}, or null when there is none. */
  ScrapedLoad scraped(WorkerId worker);
}
