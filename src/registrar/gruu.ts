import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { SipUri } from '../sip/message.js';

/** User-part prefix of a temporary GRUU: `sip:tgruu.<sealed>@<account domain>;gr`. */
const TEMP_PREFIX = 'tgruu.';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** The device a GRUU names (RFC 5627 §3). */
export type GruuTarget =
  /** A public GRUU: the AOR's `user` and the device's `+sip.instance` (angle brackets included, as bindings keep it). */
  | { kind: 'pub'; user: string; instance: string }
  /**
   * A temporary GRUU: also the Call-ID of the registration that minted it; it
   * works only while a binding of that instance with that Call-ID lives
   * (RFC 5627 §3.2: invalid once the UA registers with another Call-ID).
   */
  | { kind: 'temp'; user: string; instance: string; callId: string };

/**
 * Globally Routable UA URIs (RFC 5627) of this edge.
 *
 * @remarks
 * The public GRUU is the AOR with a `gr` parameter holding the instance URN
 * (§3.1). A temporary GRUU is stateless: the AOR's user, the instance and the
 * registration's Call-ID sealed with AES-256-GCM (the account domain as
 * associated data), so it reveals nothing of who it names (§3.2: "SHOULD NOT
 * reveal the AOR"), cannot be forged, and verifies on every node that shares the
 * secret — no store, no cleanup. Each registration mints a fresh one (random IV).
 */
export class Gruus {
  readonly #key: Buffer;

  constructor(secret: Buffer) {
    this.#key = createHash('sha256').update('gruu:').update(secret).digest();
  }

  /** `sip:<user>@<domain>;gr=<instance URN>` (RFC 5627 §3.1). */
  pub(domain: string, user: string, instance: string): string {
    return `sip:${user}@${domain};gr=${instance.replace(/^<|>$/g, '')}`;
  }

  /** A new temporary GRUU for one registration of one device (RFC 5627 §3.2). */
  temp(domain: string, user: string, instance: string, callId: string): string {
    const iv = randomBytes(IV_BYTES);
    const c = createCipheriv('aes-256-gcm', this.#key, iv).setAAD(Buffer.from(domain));
    const body = Buffer.concat([c.update(`${user}\n${instance}\n${callId}`, 'utf8'), c.final()]);
    const sealed = Buffer.concat([iv, body, c.getAuthTag()]).toString('base64url');
    return `sip:${TEMP_PREFIX}${sealed}@${domain};gr`;
  }

  /**
   * The device a Request-URI names when it is a GRUU of ours (it has a `gr`
   * parameter), else null. A temporary GRUU that does not open is `invalid`.
   */
  parse(uri: SipUri): GruuTarget | 'invalid' | null {
    if (!uri.params.has('gr') || uri.user === null) return null;
    const gr = uri.params.get('gr');
    if (uri.user.startsWith(TEMP_PREFIX)) {
      if (gr !== null && gr !== undefined && gr !== '') return 'invalid';
      const raw = Buffer.from(uri.user.slice(TEMP_PREFIX.length), 'base64url');
      if (raw.length < IV_BYTES + TAG_BYTES + 3) return 'invalid';
      try {
        const d = createDecipheriv('aes-256-gcm', this.#key, raw.subarray(0, IV_BYTES)).setAAD(Buffer.from(uri.host.toLowerCase()));
        d.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
        const text = Buffer.concat([d.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), d.final()]).toString('utf8');
        const [user, instance, callId] = text.split('\n');
        if (!user || !instance || callId === undefined) return 'invalid';
        return { kind: 'temp', user, instance, callId };
      } catch {
        return 'invalid';
      }
    }
    if (!gr) return 'invalid';
    return { kind: 'pub', user: uri.user, instance: `<${gr}>` };
  }
}

/** Whether a REGISTER asked for GRUUs (RFC 5627 §4.1: `Supported: gruu`). */
export function wantsGruu(supported: readonly string[]): boolean {
  return supported.some((o) => o.toLowerCase() === 'gruu');
}
