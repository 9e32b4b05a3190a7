package dev.kvrouter.extproc.tenancy;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.HexFormat;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import net.openhft.hashing.LongTupleHashFunction;

/**
 * The keyed 128-bit function behind effective cache salts and tenant hashes: HMAC-SHA256 with the configured
 * secret (truncated to 128 bits), or, without a secret, XXH3-128 with a fixed public seed. Output is lowercase
 * hex of 16 bytes (for XXH3-128 the canonical big-endian digest, as Python's {@code xxh3_128_hexdigest}).
 *
 * <p>Without a secret anyone who knows a tenant's id can compute its salt; that matters only when a request can
 * reach an engine without passing the router (see docs/request-path.md, "Tenancy"). Thread-safe.
 */
public abstract sealed class SaltKey {

  /** Seed of the public (secret-less) form ("kvr1salt" in ASCII). */
  public static final long PUBLIC_SEED = 0x6B76723173616C74L;
  /** Shortest secret accepted: 128 bits. */
  public static final int MIN_SECRET_BYTES = 16;

  private SaltKey() {}

  /** HMAC-SHA256 keyed by {@code secret} (at least {@value #MIN_SECRET_BYTES} bytes). */
  public static SaltKey hmac(byte[] secret) {
    if (secret.length < MIN_SECRET_BYTES) {
      throw new IllegalArgumentException("the tenancy secret must be at least " + MIN_SECRET_BYTES + " bytes");
    }
    return new Hmac(secret.clone());
  }

  /** The secret-less form: XXH3-128 seeded with {@link #PUBLIC_SEED}. */
  public static SaltKey publicSeed() {
    return Xxh3.INSTANCE;
  }

  /** True when a secret keys the function. */
  public abstract boolean secret();

  /** 32 lowercase hex characters: the first 16 bytes of the keyed digest of {@code message}. */
  public final String hex128(byte[] message) {
    return HexFormat.of().formatHex(digest16(message));
  }

  abstract byte[] digest16(byte[] message);

  private static final class Hmac extends SaltKey {
    private final SecretKeySpec key;

    Hmac(byte[] secret) {
      key = new SecretKeySpec(secret, "HmacSHA256");
    }

    @Override
    public boolean secret() {
      return true;
    }

    @Override
    byte[] digest16(byte[] message) {
      try {
        Mac mac = Mac.getInstance("HmacSHA256"); // Mac instances are not thread-safe; creation is cheap
        mac.init(key);
        byte[] full = mac.doFinal(message);
        byte[] out = new byte[16];
        System.arraycopy(full, 0, out, 0, 16);
        return out;
      } catch (GeneralSecurityException e) {
        throw new IllegalStateException("HmacSHA256 is unavailable", e);
      }
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Hmac h && MessageDigest.isEqual(h.key.getEncoded(), key.getEncoded());
    }

    @Override
    public int hashCode() {
      return 1;
    }
  }

  private static final class Xxh3 extends SaltKey {
    static final Xxh3 INSTANCE = new Xxh3();
    private static final LongTupleHashFunction XXH128 = LongTupleHashFunction.xx128(PUBLIC_SEED);

    @Override
    public boolean secret() {
      return false;
    }

    @Override
    byte[] digest16(byte[] message) {
      long[] h = XXH128.hashBytes(message); // {low64, high64}
      return ByteBuffer.allocate(16).order(ByteOrder.BIG_ENDIAN).putLong(h[1]).putLong(h[0]).array();
    }
  }
}
