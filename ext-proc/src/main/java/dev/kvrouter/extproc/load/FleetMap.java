package dev.kvrouter.extproc.load;

import java.util.Collection;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;
import java.util.function.Function;

/**
 * Per-worker state kept for the fleet's workers only. Reports keep arriving for workers that are not, or no longer,
 * in the fleet (another replica names workers as it knows them; a departed worker's last scrape or response ends
 * late), and state made for each such name would stay until the next fleet change, or greet the worker if it came
 * back under the same name. Any thread may read and make; one owner calls {@link #retain}.
 */
final class FleetMap<K, V> {

  private final ConcurrentHashMap<K, V> map = new ConcurrentHashMap<>();
  /** The fleet as last {@link #retain}ed, null before the first: until then every key counts as in it. */
  private volatile Set<K> fleet;

  V get(K key) {
    return map.get(key);
  }

  /** The key's state, made if need be; null, and none made, for a key outside the fleet. */
  V inFleet(K key, Function<? super K, ? extends V> make) {
    if (!contains(key)) {
      return null;
    }
    V v = map.computeIfAbsent(key, make);
    // made just after a retain that dropped the key: the fleet is published before the drop, so it shows here
    if (!contains(key)) {
      map.remove(key, v);
      return null;
    }
    return v;
  }

  /**
   * The key's state, made if need be even outside the fleet: for the router's own decision, whose worker was in the
   * fleet it chose from; should a retain drop it meanwhile, the next retain forgets it.
   */
  V any(K key, Function<? super K, ? extends V> make) {
    return map.computeIfAbsent(key, make);
  }

  boolean contains(K key) {
    Set<K> f = fleet;
    return f == null || f.contains(key);
  }

  /** Forgets keys outside {@code current}, and makes no state for them from then on. */
  void retain(Collection<? extends K> current) {
    Set<K> keep = Set.copyOf(current);
    fleet = keep;
    map.keySet().retainAll(keep);
  }

  void forEach(BiConsumer<? super K, ? super V> action) {
    map.forEach(action);
  }

  Collection<V> values() {
    return map.values();
  }

  Set<K> keys() {
    return map.keySet();
  }
}
