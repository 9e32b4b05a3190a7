package dev.kvrouter.extproc.replicas;

import com.neilalexander.jnacl.crypto.curve25519;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.zeromq.ZMQ;

/**
 * The replica link's CURVE key pair ({@code replicas.curve}): one pair for the whole link, the same on every member
 * (one Secret mounted in every pod). Every member's PUB socket is a CURVE server with the secret key, and admits only
 * a subscriber that proves it holds the same pair (ZAP, {@link ZmqReplicaLink}); every SUB socket is a CURVE client
 * with that pair, and so trusts only a publisher that holds the secret key. One pair rather than one per member:
 * a peer is a DNS name standing for every address it resolves to, and nothing ties an address to a member's key,
 * while a CURVE client must know its server's public key before it connects.
 *
 * <p>Keys are Z85 (40 characters, as {@code curve_keygen} prints them and zmq's {@code zmq_curve_keypair} makes
 * them): one a file, {@code curve_keygen}'s whole output, or a czmq certificate ({@code public-key = "..."},
 * {@code secret-key = "..."}). The key
 * material is never logged, nor put in an error or in {@link #toString}.
 */
public final class CurveKeys {

  private static final Pattern Z85 = Pattern.compile("[0-9a-zA-Z.\\-:+=^!/*?&<>()\\[\\]{}@%$#]{40}");

  private final byte[] publicKey;
  private final byte[] secretKey;

  private CurveKeys(byte[] publicKey, byte[] secretKey) {
    this.publicKey = publicKey;
    this.secretKey = secretKey;
  }

  /** A new random pair (tests, benchmarks). */
  public static CurveKeys generate() {
    ZMQ.Curve.KeyPair pair = ZMQ.Curve.generateKeyPair();
    return fromZ85(pair.secretKey, "a generated secret key", pair.publicKey, "its public key");
  }

  /**
   * The pair in {@code secretKeyFile}, checked against {@code publicKeyFile} when given (else derived from the secret
   * key).
   *
   * @throws IllegalArgumentException naming the setting and the file, never the key, when a file is missing,
   *     unreadable, holds no Z85 key, or the public key is not the secret key's
   */
  public static CurveKeys load(Path secretKeyFile, Path publicKeyFile) {
    String secretWhere = "replicas.curve.secret_key_file (" + secretKeyFile + ")";
    String secret = read(secretKeyFile, secretWhere, "secret-key");
    String publicWhere = publicKeyFile == null ? null : "replicas.curve.public_key_file (" + publicKeyFile + ")";
    String pub = publicKeyFile == null ? null : read(publicKeyFile, publicWhere, "public-key");
    return fromZ85(secret, secretWhere, pub, publicWhere);
  }

  static CurveKeys fromZ85(String secret, String secretWhere, String pub, String publicWhere) {
    byte[] sk = decode(secret, secretWhere);
    byte[] derived = new byte[32];
    curve25519.crypto_scalarmult_base(derived, sk);
    if (pub != null && !MessageDigest.isEqual(decode(pub, publicWhere), derived)) {
      throw new IllegalArgumentException(publicWhere + ": is not the public key of " + secretWhere
          + " (make both with one curve_keygen run)");
    }
    return new CurveKeys(derived, sk);
  }

  private static String read(Path file, String where, String certField) {
    String text;
    try {
      text = Files.readString(file, StandardCharsets.US_ASCII);
    } catch (IOException | RuntimeException e) {
      throw new IllegalArgumentException(where + ": cannot be read: " + e.getClass().getSimpleName());
    }
    String trimmed = text.strip();
    if (trimmed.length() == 40) {
      return trimmed;
    }
    // curve_keygen's output as it is: "== CURVE PUBLIC KEY ==", its key, "== CURVE SECRET KEY ==", its key
    Matcher m = Pattern.compile("== CURVE " + (certField.equals("secret-key") ? "SECRET" : "PUBLIC")
        + " KEY ==\\s*\\R(\\S*)").matcher(text);
    if (m.find()) {
      return m.group(1);
    }
    // a czmq certificate (zcert_save: the public one lists public-key, the _secret one both)
    m = Pattern.compile("(?m)^\\s*" + certField + "\\s*=\\s*\"([^\"]*)\"").matcher(text);
    if (m.find()) {
      return m.group(1);
    }
    throw new IllegalArgumentException(where + ": must hold one Z85 key of 40 characters, curve_keygen's output, "
        + "or a czmq certificate with " + certField);
  }

  private static byte[] decode(String z85, String where) {
    if (z85 == null || !Z85.matcher(z85).matches()) {
      throw new IllegalArgumentException(where + ": is not a Z85 key of 40 characters");
    }
    byte[] key = ZMQ.Curve.z85Decode(z85);
    if (key == null || key.length != 32) {
      throw new IllegalArgumentException(where + ": is not a Z85 key of 40 characters");
    }
    return key;
  }

  byte[] publicKey() {
    return publicKey.clone();
  }

  byte[] secretKey() {
    return secretKey.clone();
  }

  /** Whether {@code key} (32 bytes, a subscriber's CURVE public key) is this pair's public key. */
  boolean isPublicKey(byte[] key) {
    return MessageDigest.isEqual(publicKey, key);
  }

  @Override
  public String toString() {
    return "CurveKeys[keys not shown]";
  }
}
