import { byCreation, sessionActive, type KycSession, type KycStore, type VerificationRow, type VerificationType } from './kyc.js';

/** KYC rows in process memory (one node, development and tests). */
export class MemoryKycStore implements KycStore {
  readonly #rows = new Map<string, Map<string, VerificationRow>>();
  readonly #latest = new Map<string, Map<VerificationType, string>>();

  async put(row: VerificationRow): Promise<void> {
    let rows = this.#rows.get(row.subAuthId);
    if (!rows) this.#rows.set(row.subAuthId, (rows = new Map()));
    rows.set(row.id, { ...row });
    let latest = this.#latest.get(row.subAuthId);
    if (!latest) this.#latest.set(row.subAuthId, (latest = new Map()));
    latest.set(row.type, row.id);
  }

  async latest(subAuthId: string): Promise<Partial<Record<VerificationType, VerificationRow>>> {
    const out: Partial<Record<VerificationType, VerificationRow>> = {};
    const rows = this.#rows.get(subAuthId);
    for (const [type, id] of this.#latest.get(subAuthId) ?? []) {
      const r = rows?.get(id);
      if (r) out[type] = { ...r };
    }
    return out;
  }

  async rows(subAuthId: string): Promise<VerificationRow[]> {
    return [...(this.#rows.get(subAuthId)?.values() ?? [])].map((r) => ({ ...r })).sort(byCreation);
  }

  readonly #retries = new Map<string, number>();

  async scheduleRetry(subAuthId: string, id: string, at: number): Promise<void> {
    this.#retries.set(`${subAuthId}\n${id}`, at);
  }

  async unscheduleRetry(subAuthId: string, id: string): Promise<void> {
    this.#retries.delete(`${subAuthId}\n${id}`);
  }

  async claimDueRetries(now: number, leaseMs: number, limit: number): Promise<Array<{ subAuthId: string; id: string }>> {
    const due = [...this.#retries].filter(([, at]) => at <= now).sort((a, b) => a[1] - b[1]).slice(0, limit);
    return due.map(([k]) => {
      this.#retries.set(k, now + leaseMs);
      const [subAuthId = '', id = ''] = k.split('\n');
      return { subAuthId, id };
    });
  }

  async row(subAuthId: string, id: string): Promise<VerificationRow | null> {
    const r = this.#rows.get(subAuthId)?.get(id);
    return r ? { ...r } : null;
  }

  async clear(subAuthId: string): Promise<void> {
    this.#rows.delete(subAuthId);
    this.#latest.delete(subAuthId);
  }

  readonly #sessions = new Map<string, string>();
  readonly #active = new Map<string, string>();
  readonly #tokens = new Map<string, string>();

  async createSession(s: KycSession, now: number): Promise<{ ok: true } | { ok: false; activeId: string }> {
    const cur = this.#active.get(s.accountAuthId);
    const curS = cur ? await this.getSession(cur) : null;
    if (cur && curS && sessionActive(curS, now)) return { ok: false, activeId: cur };
    this.#sessions.set(s.id, JSON.stringify(s));
    this.#active.set(s.accountAuthId, s.id);
    this.#tokens.set(s.token, s.id);
    return { ok: true };
  }

  async getSession(id: string): Promise<KycSession | null> {
    const j = this.#sessions.get(id);
    return j ? (JSON.parse(j) as KycSession) : null;
  }

  async sessionByToken(token: string): Promise<KycSession | null> {
    const id = this.#tokens.get(token);
    return id ? this.getSession(id) : null;
  }

  async replaceSession(old: KycSession, next: KycSession): Promise<boolean> {
    if (this.#sessions.get(old.id) !== JSON.stringify(old)) return false;
    this.#sessions.set(next.id, JSON.stringify(next));
    return true;
  }

  async partnerSessions(partnerId: string): Promise<KycSession[]> {
    return [...this.#sessions.values()]
      .map((j) => JSON.parse(j) as KycSession)
      .filter((s) => s.partnerId === partnerId)
      .reverse();
  }

  async close(): Promise<void> {}
}
