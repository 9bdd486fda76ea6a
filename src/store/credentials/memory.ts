import type { CredentialStore, EndpointCredential } from './credentials.js';

/** The embedded credential store: HA1 values in a Map, gone at exit. */
export class MemoryCredentialStore implements CredentialStore {
  /** domain → user → credential. */
  readonly #byDomain = new Map<string, Map<string, EndpointCredential>>();

  async get(domain: string, user: string): Promise<EndpointCredential | null> {
    const c = this.#byDomain.get(domain)?.get(user);
    return c ? { ...c } : null;
  }

  async put(domain: string, user: string, cred: EndpointCredential): Promise<void> {
    let m = this.#byDomain.get(domain);
    if (!m) {
      m = new Map();
      this.#byDomain.set(domain, m);
    }
    // Copy the known fields only, so the caller's object (or extra properties on
    // it, such as a plaintext password) is never retained.
    const copy: EndpointCredential = { endpointId: cred.endpointId, ha1Md5: cred.ha1Md5, ha1Sha256: cred.ha1Sha256 };
    if (cred.disabled) copy.disabled = true;
    m.set(user, copy);
  }

  async delete(domain: string, user: string): Promise<void> {
    const m = this.#byDomain.get(domain);
    if (!m) return;
    m.delete(user);
    if (m.size === 0) this.#byDomain.delete(domain);
  }

  async close(): Promise<void> {
    this.#byDomain.clear();
  }
}
