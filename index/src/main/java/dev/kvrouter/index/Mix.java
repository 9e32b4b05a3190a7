package dev.kvrouter.index;

/** Bit mixing for table indices (the murmur3 / splitmix64 finalizer). */
final class Mix {

  private Mix() {}

  static long mix(long x) {
    x = (x ^ (x >>> 33)) * 0xff51afd7ed558ccdL;
    x = (x ^ (x >>> 33)) * 0xc4ceb9fe1a85ec53L;
    return x ^ (x >>> 33);
  }
}
