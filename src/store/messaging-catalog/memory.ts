import type {
  CallRequestRecord,
  CampaignProgress,
  CampaignRecord,
  CampaignStatus,
  CannedResponseRecord,
  ClaimRecord,
  ContactRecord,
  ContactUpsert,
  MessagingCatalogStore,
  NumberRecord,
  TemplateRecord,
  UpsertContactResult,
} from './catalog.js';

interface Run {
  recipients: string[] | null;
  claims: Map<string, ClaimRecord>;
  inFlight: Set<string>;
  cursor: number;
  sent: number;
  failed: number;
  unconfirmed: number;
}

interface Lease {
  holder: string;
  until: number;
}

/** Records are copied in and out, as a Redis store would (no shared mutable state with callers). */
const copy = <T>(v: T): T => structuredClone(v);

/** Owner → id → record, in insertion order. */
class Owned<T extends { id: string; owner: string }> {
  readonly #by = new Map<string, Map<string, T>>();
  of(owner: string): Map<string, T> {
    let m = this.#by.get(owner);
    if (!m) this.#by.set(owner, (m = new Map()));
    return m;
  }
  get(owner: string, id: string): T | null {
    const v = this.#by.get(owner)?.get(id);
    return v ? copy(v) : null;
  }
  list(owner: string): T[] {
    return [...(this.#by.get(owner)?.values() ?? [])].map(copy);
  }
  put(v: T): void {
    this.of(v.owner).set(v.id, copy(v));
  }
  delete(owner: string, id: string): boolean {
    return this.#by.get(owner)?.delete(id) ?? false;
  }
}

/** The messaging catalog in process memory (one node; tests and the embedded default). */
export class MemoryMessagingCatalogStore implements MessagingCatalogStore {
  readonly #contacts = new Owned<ContactRecord>();
  readonly #phones = new Map<string, Map<string, string>>();
  readonly #templates = new Owned<TemplateRecord>();
  readonly #canned = new Owned<CannedResponseRecord>();
  readonly #numbers = new Owned<NumberRecord>();
  readonly #calls = new Owned<CallRequestRecord>();
  readonly #campaigns = new Owned<CampaignRecord>();
  readonly #running = new Map<string, string>();
  readonly #runs = new Map<string, Run>();
  readonly #leases = new Map<string, Lease>();

  #phonesOf(owner: string): Map<string, string> {
    let m = this.#phones.get(owner);
    if (!m) this.#phones.set(owner, (m = new Map()));
    return m;
  }

  async upsertContacts(owner: string, rows: ContactUpsert[], newId: (i: number) => string, now: string): Promise<UpsertContactResult[]> {
    const phones = this.#phonesOf(owner);
    const all = this.#contacts.of(owner);
    return rows.map((r, i) => {
      const id = phones.get(r.phone);
      const old = id !== undefined ? all.get(id) : undefined;
      if (old) {
        const c: ContactRecord = {
          ...old,
          name: r.name ?? old.name,
          tags: [...new Set([...old.tags, ...(r.tags ?? [])])],
          attributes: { ...old.attributes, ...r.attributes },
          updatedAt: now,
        };
        all.set(c.id, c);
        return { created: false, contact: copy(c) };
      }
      const c: ContactRecord = { id: newId(i), owner, phone: r.phone, name: r.name ?? '', tags: [...new Set(r.tags ?? [])], attributes: { ...r.attributes }, createdAt: now, updatedAt: now };
      all.set(c.id, c);
      phones.set(c.phone, c.id);
      return { created: true, contact: copy(c) };
    });
  }

  async replaceContact(c: ContactRecord): Promise<'ok' | 'phone_taken' | 'not_found'> {
    const old = this.#contacts.of(c.owner).get(c.id);
    if (!old) return 'not_found';
    const phones = this.#phonesOf(c.owner);
    const holder = phones.get(c.phone);
    if (holder !== undefined && holder !== c.id) return 'phone_taken';
    phones.delete(old.phone);
    phones.set(c.phone, c.id);
    this.#contacts.put(c);
    return 'ok';
  }

  async getContact(owner: string, id: string): Promise<ContactRecord | null> {
    return this.#contacts.get(owner, id);
  }

  async getContacts(owner: string, ids: string[]): Promise<Array<ContactRecord | null>> {
    return ids.map((id) => this.#contacts.get(owner, id));
  }

  async listContacts(owner: string): Promise<ContactRecord[]> {
    return this.#contacts.list(owner);
  }

  async deleteContact(owner: string, id: string): Promise<boolean> {
    const c = this.#contacts.of(owner).get(id);
    if (!c) return false;
    this.#phonesOf(owner).delete(c.phone);
    return this.#contacts.delete(owner, id);
  }

  async putTemplate(t: TemplateRecord): Promise<void> {
    this.#templates.put(t);
  }
  async listTemplates(owner: string): Promise<TemplateRecord[]> {
    return this.#templates.list(owner);
  }
  async deleteTemplate(owner: string, id: string): Promise<boolean> {
    return this.#templates.delete(owner, id);
  }

  async createCanned(c: CannedResponseRecord): Promise<'ok' | 'taken'> {
    if (this.#canned.list(c.owner).some((x) => x.shortcut === c.shortcut)) return 'taken';
    this.#canned.put(c);
    return 'ok';
  }
  async listCanned(owner: string): Promise<CannedResponseRecord[]> {
    return this.#canned.list(owner);
  }
  async deleteCanned(owner: string, id: string): Promise<boolean> {
    return this.#canned.delete(owner, id);
  }

  async createNumber(n: NumberRecord): Promise<'ok' | 'taken'> {
    if (this.#numbers.list(n.owner).some((x) => x.phoneNumber === n.phoneNumber)) return 'taken';
    this.#numbers.put(n);
    return 'ok';
  }
  async listNumbers(owner: string): Promise<NumberRecord[]> {
    return this.#numbers.list(owner);
  }
  async getNumber(owner: string, id: string): Promise<NumberRecord | null> {
    return this.#numbers.get(owner, id);
  }
  async deleteNumber(owner: string, id: string): Promise<boolean> {
    return this.#numbers.delete(owner, id);
  }

  async createCall(c: CallRequestRecord): Promise<void> {
    this.#calls.put(c);
  }
  async listCalls(owner: string): Promise<CallRequestRecord[]> {
    return this.#calls.list(owner);
  }
  async getCall(owner: string, id: string): Promise<CallRequestRecord | null> {
    return this.#calls.get(owner, id);
  }

  async createCampaign(c: CampaignRecord): Promise<void> {
    this.#campaigns.put(c);
    if (c.status === 'running') this.#running.set(c.id, c.owner);
  }
  async getCampaign(owner: string, id: string): Promise<CampaignRecord | null> {
    return this.#campaigns.get(owner, id);
  }
  async listCampaigns(owner: string): Promise<CampaignRecord[]> {
    return this.#campaigns.list(owner);
  }
  async updateCampaign(c: CampaignRecord, from: readonly CampaignStatus[]): Promise<CampaignRecord | { conflict: CampaignStatus } | null> {
    const old = this.#campaigns.get(c.owner, c.id);
    if (!old) return null;
    if (!from.includes(old.status)) return { conflict: old.status };
    this.#campaigns.put(c);
    if (c.status === 'running') this.#running.set(c.id, c.owner);
    else this.#running.delete(c.id);
    return copy(c);
  }
  async deleteCampaign(owner: string, id: string): Promise<boolean> {
    if (!this.#campaigns.delete(owner, id)) return false;
    this.#running.delete(id);
    this.#runs.delete(id);
    this.#leases.delete(id);
    return true;
  }
  async runningCampaigns(): Promise<Array<{ owner: string; id: string }>> {
    return [...this.#running].map(([id, owner]) => ({ owner, id }));
  }

  #run(id: string): Run {
    let r = this.#runs.get(id);
    if (!r) this.#runs.set(id, (r = { recipients: null, claims: new Map(), inFlight: new Set(), cursor: 0, sent: 0, failed: 0, unconfirmed: 0 }));
    return r;
  }

  async setRecipients(campaignId: string, contactIds: string[]): Promise<number> {
    const r = this.#run(campaignId);
    r.recipients ??= [...contactIds];
    return r.recipients.length;
  }
  async recipients(campaignId: string, start: number, count: number): Promise<string[]> {
    return (this.#runs.get(campaignId)?.recipients ?? []).slice(start, start + count);
  }
  async claim(campaignId: string, index: number, contactId: string, messageId: string, holder: string): Promise<boolean> {
    const r = this.#run(campaignId);
    if (r.claims.has(contactId)) return false;
    r.claims.set(contactId, { state: 'claimed', messageId, holder });
    r.inFlight.add(contactId);
    r.cursor = Math.max(r.cursor, index + 1);
    return true;
  }
  async settle(campaignId: string, contactId: string, outcome: { state: 'sent'; sentId: string } | { state: 'failed'; error: string }): Promise<boolean> {
    const r = this.#run(campaignId);
    const c = r.claims.get(contactId);
    if (!c || (c.state !== 'claimed' && c.state !== 'unconfirmed')) return false;
    if (c.state === 'unconfirmed') r.unconfirmed--;
    r.inFlight.delete(contactId);
    if (outcome.state === 'sent') {
      r.sent++;
      r.claims.set(contactId, { ...c, state: 'sent', sentId: outcome.sentId });
    } else {
      r.failed++;
      r.claims.set(contactId, { ...c, state: 'failed', error: outcome.error });
    }
    return true;
  }
  async markUnconfirmed(campaignId: string): Promise<number> {
    const r = this.#run(campaignId);
    const n = r.inFlight.size;
    for (const id of r.inFlight) {
      const c = r.claims.get(id);
      if (c) r.claims.set(id, { ...c, state: 'unconfirmed' });
    }
    r.inFlight.clear();
    r.unconfirmed += n;
    return n;
  }
  async progress(campaignId: string): Promise<CampaignProgress> {
    const r = this.#runs.get(campaignId);
    if (!r) return { total: 0, sent: 0, failed: 0, unconfirmed: 0, inFlight: 0, cursor: 0 };
    return { total: r.recipients?.length ?? 0, sent: r.sent, failed: r.failed, unconfirmed: r.unconfirmed, inFlight: r.inFlight.size, cursor: r.cursor };
  }
  async getClaim(campaignId: string, contactId: string): Promise<ClaimRecord | null> {
    const c = this.#runs.get(campaignId)?.claims.get(contactId);
    return c ? copy(c) : null;
  }
  async acquireLease(campaignId: string, holder: string, ttlMs: number): Promise<boolean> {
    const l = this.#leases.get(campaignId);
    if (l && l.until > Date.now() && l.holder !== holder) return false;
    this.#leases.set(campaignId, { holder, until: Date.now() + ttlMs });
    return true;
  }
  async renewLease(campaignId: string, holder: string, ttlMs: number): Promise<boolean> {
    const l = this.#leases.get(campaignId);
    if (!l || l.holder !== holder || l.until <= Date.now()) return false;
    l.until = Date.now() + ttlMs;
    return true;
  }
  async releaseLease(campaignId: string, holder: string): Promise<void> {
    if (this.#leases.get(campaignId)?.holder === holder) this.#leases.delete(campaignId);
  }

  async close(): Promise<void> {}
}
