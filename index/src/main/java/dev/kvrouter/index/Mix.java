package dev.kvrouter.index;

/** Bit mixing for table indices and hash-keyed picks (the murmur3 / splitmix64 finalizer). */
public final class Mix {

  private Mix() {}

  public static long mix(long x) {
    x = (x ^ (x >>> 33)) * 0xff51afd7ed558ccdL;
    x = (x ^ (x >>> 33)) * 0xc4ceb9fe1a85ec53L;
    return x ^ (x >>> 33);
  }
}
