/**
 * Callback signing secrets at rest (README "Secrets at rest", docs/callbacks.md): the
 * call store keeps each account's secret sealed by the secret box (`enc:v1:<kid>:…`,
 * bound to the account's domain); this wrapper seals on write and opens on read, so the
 * API and the dispatcher see plaintext and the store never does. A record written
 * before encryption (no `enc:` prefix) is read as plaintext and sealed when next written.
 */
import type { SecretBox } from '../security/secret-box.js';
import type { CallStore } from '../store/calls/calls.js';

/** What a sealed signing secret is bound to: it opens for this account only. */
export function signingSecretContext(domain: string): string {
  return `callback_signing_secret:${domain}`;
}

/**
 * The call store with its signing secrets sealed by `box`. Every other method is the
 * store's own. A secret that cannot be opened throws SecretBoxError (no key, no value in it).
 */
export function sealSigningSecrets(store: CallStore, box: SecretBox): CallStore {
  const signingSecret = async (domain: string): Promise<string | null> => {
    const stored = await store.signingSecret(domain);
    return stored === null ? null : box.decrypt(stored, signingSecretContext(domain));
  };
  const setSigningSecret = (domain: string, secret: string): Promise<void> =>
    store.setSigningSecret(domain, box.encrypt(secret, signingSecretContext(domain)));
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'signingSecret') return signingSecret;
      if (prop === 'setSigningSecret') return setSigningSecret;
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
