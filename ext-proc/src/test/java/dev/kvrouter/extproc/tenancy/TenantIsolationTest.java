package dev.kvrouter.extproc.tenancy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvrouter.extproc.request.Fixtures;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Set;
import org.junit.jupiter.api.Test;

class TenantIsolationTest {

  static final JsonNode SALTS = Fixtures.requestSemantics().path("salts");
  static final byte[] SECRET = HexFormat.of().parseHex("000102030405060708090a0b0c0d0e0f");

  static String text(JsonNode n) {
    return n.isNull() ? null : n.asText();
  }

  @Test
  void saltsAndTenantHashesMatchTheIndependentPythonDerivation() {
    assertThat(SALTS.size()).isGreaterThanOrEqualTo(30);
    for (JsonNode c : SALTS) {
      String secret = text(c.path("secret_hex"));
      SaltKey key = secret == null ? SaltKey.publicSeed() : SaltKey.hmac(HexFormat.of().parseHex(secret));
      boolean share = c.path("share").asBoolean();
      TenantIsolation iso = new TenantIsolation(key, share);
      String tenant = text(c.path("tenant"));
      String salt = text(c.path("client_salt"));
      assertThat(iso.effectiveSalt(null, tenant, salt)).as(c.toString()).isEqualTo(text(c.path("effective_salt")));
      assertThat(iso.tenantHash(tenant)).as(c.toString()).isEqualTo(text(c.path("tenant_hash")));
      // a model override of the same value changes nothing; the opposite one flips the rule
      assertThat(new TenantIsolation(key, !share).effectiveSalt(share, tenant, salt))
          .isEqualTo(text(c.path("effective_salt")));
    }
  }

  @Test
  void isolatedTenantsGetDistinctSaltsAndAClientSaltNeverPassesThrough() {
    TenantIsolation iso = new TenantIsolation(SaltKey.hmac(SECRET), false);
    Set<String> seen = new HashSet<>();
    for (String tenant : new String[] {"acme", "globex", null}) {
      for (String client : new String[] {null, "s1", "s2"}) {
        String salt = iso.effectiveSalt(null, tenant, client);
        if (tenant == null && client == null) {
          assertThat(salt).isNull(); // the shared namespace
          continue;
        }
        assertThat(salt).startsWith(TenantIsolation.SALT_PREFIX).hasSize(5 + 32).isNotEqualTo(client);
        assertThat(seen.add(salt)).as("%s/%s collides", tenant, client).isTrue();
      }
    }
    // a client cannot name a tenant's salt by sending it: its own salt is re-derived
    String acme = iso.effectiveSalt(null, "acme", null);
    assertThat(iso.effectiveSalt(null, null, acme)).isNotEqualTo(acme);
    assertThat(iso.effectiveSalt(null, "globex", acme)).isNotEqualTo(acme);
  }

  @Test
  void sharingIgnoresTheTenantButKeepsClientSaltsApart() {
    TenantIsolation shared = new TenantIsolation(SaltKey.publicSeed(), true);
    assertThat(shared.effectiveSalt(null, "acme", null)).isNull();
    assertThat(shared.effectiveSalt(null, "acme", "s")).isEqualTo(shared.effectiveSalt(null, "globex", "s"))
        .isEqualTo(shared.effectiveSalt(null, null, "s"));
    // a model can opt out of the global rule in either direction
    TenantIsolation isolated = TenantIsolation.defaults();
    assertThat(isolated.effectiveSalt(true, "acme", null)).isNull();
    assertThat(shared.effectiveSalt(false, "acme", null)).isEqualTo(isolated.effectiveSalt(null, "acme", null));
  }

  @Test
  void anEmptyTenantHeaderCountsAsNone() {
    TenantIsolation iso = TenantIsolation.defaults();
    assertThat(iso.effectiveSalt(null, "", null)).isNull();
    assertThat(iso.tenantHash("")).isNull();
    assertThat(iso.effectiveSalt(null, "", "s")).isEqualTo(iso.effectiveSalt(null, null, "s"));
  }

  @Test
  void theSecretChangesEverySaltAndMustBeLongEnough() {
    TenantIsolation a = new TenantIsolation(SaltKey.hmac(SECRET), false);
    TenantIsolation b = new TenantIsolation(SaltKey.hmac("another secret, 16+ bytes".getBytes()), false);
    assertThat(a.effectiveSalt(null, "acme", null)).isNotEqualTo(b.effectiveSalt(null, "acme", null))
        .isNotEqualTo(TenantIsolation.defaults().effectiveSalt(null, "acme", null));
    assertThat(a.tenantHash("acme")).isNotEqualTo(b.tenantHash("acme")).hasSize(16);
    assertThat(a.keyed()).isTrue();
    assertThat(TenantIsolation.defaults().keyed()).isFalse();
    assertThatThrownBy(() -> SaltKey.hmac(new byte[15])).hasMessageContaining("at least 16 bytes");
  }

  /** Replicas given one secret, one through a file and one through the environment, must derive the same salts. */
  @Test
  void aSecretFromTheEnvironmentIsReadLikeOneFromAFile(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
      throws Exception {
    java.nio.file.Path file = dir.resolve("secret");
    java.nio.file.Files.writeString(file, "the-shared-secret-0123456789\n");
    TenantIsolation fromFile = new TenantIsolation(SaltKey.load(file, null, name -> null), false);
    for (String env : new String[] {"the-shared-secret-0123456789\n", "the-shared-secret-0123456789\r\n",
        "the-shared-secret-0123456789"}) {
      TenantIsolation fromEnv = new TenantIsolation(SaltKey.load(null, "KVR_SECRET", name -> env), false);
      assertThat(fromEnv.effectiveSalt(null, "acme", null)).isEqualTo(fromFile.effectiveSalt(null, "acme", null));
    }
  }

  @Test
  void theTenantHashRevealsNothingOfTheSalt() {
    TenantIsolation iso = TenantIsolation.defaults();
    String hash = iso.tenantHash("acme");
    assertThat(iso.effectiveSalt(null, "acme", null)).doesNotContain(hash);
    assertThat(hash).doesNotContain("acme");
  }
}
