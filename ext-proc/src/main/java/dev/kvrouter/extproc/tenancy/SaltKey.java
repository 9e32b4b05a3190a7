package dev.kvrouter.extproc.tenancy;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.function.Function;
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

  /**
   * The key a configuration asks for: the secret in {@code secretFile} or in the environment variable
   * {@code secretEnv} (trailing newlines stripped from either), or the public seed when neither is set. The secret is never logged
   * or echoed in errors.
   *
   * @throws IllegalArgumentException naming the setting when the secret is missing, unreadable or too short
   */
  public static SaltKey load(Path secretFile, String secretEnv, Function<String, String> getenv) {
    if (secretFile != null && secretEnv != null) {
      throw new IllegalArgumentException("tenancy: set secret_file or secret_env, not both");
    }
    byte[] secret;
    String where;
    if (secretFile != null) {
      where = "tenancy.secret_file (" + secretFile + ")";
      try {
        secret = stripNewlines(Files.readAllBytes(secretFile));
      } catch (IOException e) {
        throw new IllegalArgumentException(where + ": cannot be read: " + e.getClass().getSimpleName());
      }
    } else if (secretEnv != null) {
      where = "tenancy.secret_env ($" + secretEnv + ")";
      String v = getenv.apply(secretEnv);
      if (v == null) {
        throw new IllegalArgumentException(where + ": the variable is not set");
      }
      // Stripped like the file's: `export X="$(cat secret)"` drops the newline, an env file or a secret mounted
      // into env keeps it, and replicas fed the same secret either way must derive the same salts.
      secret = stripNewlines(v.getBytes(StandardCharsets.UTF_8));
    } else {
      return publicSeed();
    }
    if (secret.length < MIN_SECRET_BYTES) {
      throw new IllegalArgumentException(where + ": the secret must be at least " + MIN_SECRET_BYTES + " bytes");
    }
    return hmac(secret);
  }

  private static byte[] stripNewlines(byte[] b) {
    int n = b.length;
    while (n > 0 && (b[n - 1] == '\n' || b[n - 1] == '\r')) {
      n--;
    }
    return n == b.length ? b : java.util.Arrays.copyOf(b, n);
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
    // Mac instances are not thread-safe and Mac.getInstance costs microseconds; request threads are a fixed pool.
    private final ThreadLocal<Mac> macs;

    Hmac(byte[] secret) {
      key = new SecretKeySpec(secret, "HmacSHA256");
      macs = ThreadLocal.withInitial(this::newMac);
    }

    private Mac newMac() {
      try {
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(key);
        return mac;
      } catch (GeneralSecurityException e) {
        throw new IllegalStateException("HmacSHA256 is unavailable", e);
      }
    }

    @Override
    public boolean secret() {
      return true;
    }

    @Override
    byte[] digest16(byte[] message) {
      byte[] full = macs.get().doFinal(message); // doFinal resets the Mac for the next use
      byte[] out = new byte[16];
      System.arraycopy(full, 0, out, 0, 16);
      return out;
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
