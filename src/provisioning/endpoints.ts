import { computeHa1 } from '../auth/digest.js';
import type { CredentialStore, EndpointCredential } from '../store/credentials/credentials.js';
import {
  newNumericId,
  type AccountRecord,
  type Directory,
  type EndpointPatch,
  type EndpointRecord,
} from '../store/directory/directory.js';
import { aorKey, type Aor, type LocationStore } from '../store/location/location.js';

/**
 * Endpoint provisioning: the writes behind the Endpoint API, in the order that
 * keeps the three stores consistent (docs/design.md "Domain model"):
 * - create: the record, then the credential; a credential that cannot be written
 *   undoes the record (no endpoint without a credential, the username is freed);
 * - password change: the new credential first (a refresh arriving meanwhile
 *   already meets it), then the record, then every binding dropped;
 * - delete: the credential before and after the record (a concurrent password
 *   change cannot resurrect it), the username retired, the bindings dropped;
 * - a sub-account's cascade and its enable/disable.
 *
 * The API (src/api/endpoints.ts) validates and shapes answers; this module owns
 * the writes. `api → auth` is legitimate: deriving the HA1 values is provisioning.
 */

/**
 * The one derivation of an endpoint's stored credential (RFC 7616 §3.4.2):
 * HA1 = H(username ":" realm ":" password) in MD5 and SHA-256, realm = the
 * account SIP domain. The plaintext is never kept.
 */
export function deriveCredential(endpointId: string, username: string, realm: string, password: string, disabled = false): EndpointCredential {
  const cred: EndpointCredential = {
    endpointId,
    ha1Md5: computeHa1('MD5', username, realm, password),
    ha1Sha256: computeHa1('SHA-256', username, realm, password),
  };
  if (disabled) cred.disabled = true;
  return cred;
}

/** Where provisioning notes what it removed (a request's logger). */
export interface ProvisioningLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** The AOR of an endpoint of an account. */
export function endpointAor(account: AccountRecord, e: Pick<EndpointRecord, 'username'>): Aor {
  return { domain: account.sipDomain, user: e.username };
}

export interface ProvisioningDeps {
  directory: Directory;
  credentials: CredentialStore;
  location: LocationStore;
  /** An endpoint's bindings were removed: close the flows only it used (the registrar's removeFlowsOf). */
  onEndpointRemoved?: (aor: Aor) => void;
}

export type CreateEndpointOutcome =
  | { ok: true; endpoint: EndpointRecord }
  | { ok: false; reason: 'username_taken' | 'username_retired' | 'no_application' | 'no_subaccount' | 'no_id' };

export type UpdateEndpointOutcome = { ok: true } | { ok: false; reason: 'not_found' | 'no_application' };

/** How many ids are tried when a fresh one is taken (15 random digits: practically never). */
const ID_ATTEMPTS = 5;

export class EndpointProvisioning {
  constructor(private readonly deps: ProvisioningDeps) {}

  /** Record, then credential (undone together); the endpoint is offline from the start when its owner is disabled. */
  async create(account: AccountRecord, fields: Omit<EndpointRecord, 'endpointId' | 'accountAuthId'>, password: string): Promise<CreateEndpointOutcome> {
    const { directory, credentials } = this.deps;
    let rec: EndpointRecord | null = null;
    for (let attempt = 0; attempt < ID_ATTEMPTS && rec === null; attempt++) {
      const candidate: EndpointRecord = { ...fields, endpointId: newNumericId(), accountAuthId: account.authId };
      const r = await directory.createEndpoint(candidate);
      if (r === 'ok') rec = candidate;
      else if (r !== 'id_taken') return { ok: false, reason: r };
    }
    if (rec === null) return { ok: false, reason: 'no_id' };
    const realm = account.sipDomain;
    try {
      const disabled = await this.ownerDisabled(account, rec.subAccount);
      await credentials.put(realm, rec.username, deriveCredential(rec.endpointId, rec.username, realm, password, disabled));
      // A sub-account disabled while this one was being written: the flag must not be lost.
      if (!disabled && (await this.ownerDisabled(account, rec.subAccount))) {
        await credentials.put(realm, rec.username, deriveCredential(rec.endpointId, rec.username, realm, password, true));
      }
    } catch (err) {
      // No endpoint without a credential: undo, and free the username.
      await directory.deleteEndpoint(account.authId, rec.endpointId, { retire: false }).catch(() => undefined);
      throw err;
    }
    return { ok: true, endpoint: rec };
  }

  /** A record update; with a password, the new credential first and every binding dropped after (the spec: clients re-register). */
  async update(account: AccountRecord, e: EndpointRecord, patch: EndpointPatch, password: string | undefined, log: ProvisioningLog): Promise<UpdateEndpointOutcome> {
    const { directory, credentials } = this.deps;
    const aor = endpointAor(account, e);
    if (password !== undefined) {
      const disabled = await this.ownerDisabled(account, e.subAccount);
      await credentials.put(aor.domain, e.username, deriveCredential(e.endpointId, e.username, aor.domain, password, disabled));
    }
    const r = await directory.updateEndpoint(account.authId, e.endpointId, patch);
    if (!r.ok) {
      // Deleted meanwhile: the credential written above must not outlive it.
      if (r.reason === 'not_found' && password !== undefined) await credentials.delete(aor.domain, e.username);
      return { ok: false, reason: r.reason };
    }
    if (password !== undefined) await this.dropBindings(aor, log);
    return { ok: true };
  }

  /** Credential, record (username retired for good), bindings. False when it was already gone. */
  async delete(account: AccountRecord, e: EndpointRecord, log: ProvisioningLog): Promise<boolean> {
    const { directory, credentials } = this.deps;
    const aor = endpointAor(account, e);
    await credentials.delete(aor.domain, e.username);
    const gone = (await directory.deleteEndpoint(account.authId, e.endpointId, { retire: true })) !== null;
    await credentials.delete(aor.domain, e.username);
    if (gone) await this.dropBindings(aor, log);
    return gone;
  }

  /** Every endpoint of a sub-account deleted (sub-account delete with cascade). Returns how many. */
  async deleteSubAccountEndpoints(account: AccountRecord, subAuthId: string, log: ProvisioningLog): Promise<number> {
    let n = 0;
    for (;;) {
      const page = await this.deps.directory.listEndpoints(account.authId, { subAccount: subAuthId }, { limit: 100, offset: 0 });
      if (page.items.length === 0) return n;
      for (const e of page.items) {
        if (await this.delete(account, e, log)) n++;
        else await this.dropBindings(endpointAor(account, e), log);
      }
    }
  }

  /**
   * A sub-account was disabled or enabled: its endpoints' credentials carry the
   * flag the registrar checks (403 while disabled), and disabling unregisters their
   * devices at once and closes their flows (README "Disabled accounts").
   */
  async setSubAccountDisabled(account: AccountRecord, subAuthId: string, disabled: boolean, log: ProvisioningLog): Promise<number> {
    const { directory, credentials } = this.deps;
    let n = 0;
    for (let offset = 0; ; offset += 100) {
      const page = await directory.listEndpoints(account.authId, { subAccount: subAuthId }, { limit: 100, offset });
      for (const e of page.items) {
        const aor = endpointAor(account, e);
        const cred = await credentials.get(aor.domain, e.username);
        if (cred && (cred.disabled === true) !== disabled) {
          const next: EndpointCredential = { endpointId: cred.endpointId, ha1Md5: cred.ha1Md5, ha1Sha256: cred.ha1Sha256 };
          if (disabled) next.disabled = true;
          await credentials.put(aor.domain, e.username, next);
        }
        if (disabled) await this.dropBindings(aor, log);
        n++;
      }
      if (page.items.length < 100) return n;
    }
  }

  /** Whether endpoints of this owner are offline: the account, or their sub-account, disabled. */
  private async ownerDisabled(account: AccountRecord, subAccount: string | null): Promise<boolean> {
    if (!account.enabled) return true;
    if (subAccount === null) return false;
    const s = await this.deps.directory.getSubAccount(account.authId, subAccount);
    return s !== null && !s.enabled;
  }

  /** Unregister an endpoint's devices at once and close the flows only it used. */
  private async dropBindings(aor: Aor, log: ProvisioningLog): Promise<void> {
    const n = await this.deps.location.removeAll(aor);
    try {
      this.deps.onEndpointRemoved?.(aor);
    } catch (err) {
      log.warn({ err, aor: aorKey(aor) }, 'onEndpointRemoved failed');
    }
    log.info({ aor: aorKey(aor), bindings: n }, 'endpoint bindings removed');
  }
}
