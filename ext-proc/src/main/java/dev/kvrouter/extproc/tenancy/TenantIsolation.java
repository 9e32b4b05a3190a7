package dev.kvrouter.extproc.tenancy;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * Gives every tenant its own cache identity by deriving the {@code cache_salt} the engine sees. vLLM folds the
 * salt into the first block's hash, so two requests share cached blocks only with equal salts; the router
 * rewrites the request's salt, the engine partitions its cache by it, and its KV events come back carrying it, so
 * the router's index and the engine agree (the index recognises router-made salts by {@link #SALT_PREFIX}).
 *
 * <pre>
 *   isolated (default), tenant present:   kvr1: + K(tenant, client salt or none)
 *   no tenant (or shared), client salt:   kvr1: + K(none, client salt)
 *   no tenant (or shared), no salt:       none: the shared namespace
 *   K(t, s) = SaltKey over "kvrouter-salt-v1" 0x00 || field(t) || field(s),
 *   field(x) = 0x00 when absent, else 0x01 || uint32 big-endian length || UTF-8 bytes
 * </pre>
 *
 * <p>A client's own salt is always re-derived, never passed through, so no client can pick a value that lands in
 * another tenant's partition. Tenant values never leave this class except as {@link #tenantHash}, which decision
 * records and logs carry instead.
 *
 * <p>Immutable and thread-safe.
 */
public final class TenantIsolation {

  /** Prefix of every salt the router derives; the index uses it to recognise them in KV events. */
  public static final String SALT_PREFIX = "kvr1:";

  private static final byte[] SALT_DOMAIN = "kvrouter-salt-v1".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] TENANT_DOMAIN = "kvrouter-tenant-v1".getBytes(StandardCharsets.US_ASCII);

  private final SaltKey key;
  private final boolean shareAcrossTenants;

  /**
   * @param key the keyed function (with the configured secret, or the public seed)
   * @param shareAcrossTenants the global rule: true lets tenants share cache identity; models may override it
   */
  public TenantIsolation(SaltKey key, boolean shareAcrossTenants) {
    this.key = key;
    this.shareAcrossTenants = shareAcrossTenants;
  }

  /** Isolated tenants, secret-less keys: the defaults of a fresh configuration. */
  public static TenantIsolation defaults() {
    return new TenantIsolation(SaltKey.publicSeed(), false);
  }

  public boolean shareAcrossTenants() {
    return shareAcrossTenants;
  }

  public boolean keyed() {
    return key.secret();
  }

  /**
   * The salt the engine must see.
   *
   * @param modelShares the model's override of the sharing rule, or null for the global one
   * @param tenant the trusted tenant header value, or null (an empty value counts as none)
   * @param clientSalt the request's own {@code cache_salt}, or null
   * @return the effective salt, or null for the shared namespace (no rewrite)
   */
  public String effectiveSalt(Boolean modelShares, String tenant, String clientSalt) {
    boolean share = modelShares != null ? modelShares : shareAcrossTenants;
    String t = share || tenant == null || tenant.isEmpty() ? null : tenant;
    if (t == null && clientSalt == null) {
      return null;
    }
    return SALT_PREFIX + key.hex128(message(SALT_DOMAIN, t, clientSalt));
  }

  /**
   * A pseudonym of the tenant for decision records, logs and metrics: 16 hex characters, keyed like the salts,
   * from a different domain so it reveals nothing about them. Null for no tenant.
   */
  public String tenantHash(String tenant) {
    if (tenant == null || tenant.isEmpty()) {
      return null;
    }
    return key.hex128(message(TENANT_DOMAIN, tenant)).substring(0, 16);
  }

  static byte[] message(byte[] domain, String... fields) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(64);
    out.writeBytes(domain);
    out.write(0);
    for (String f : fields) {
      if (f == null) {
        out.write(0);
      } else {
        byte[] b = f.getBytes(StandardCharsets.UTF_8);
        out.write(1);
        out.writeBytes(ByteBuffer.allocate(4).putInt(b.length).array());
        out.writeBytes(b);
      }
    }
    return out.toByteArray();
  }
}
