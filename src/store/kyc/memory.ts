import { byCreation, type KycStore, type VerificationRow, type VerificationType } from './kyc.js';

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

  async clear(subAuthId: string): Promise<void> {
    this.#rows.delete(subAuthId);
    this.#latest.delete(subAuthId);
  }

  async close(): Promise<void> {}
}
