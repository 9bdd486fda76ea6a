import type { ChildKind, ChildRecords, IpAclRecord, PutChildResult, TrunkCredentialRecord, TrunkRecord, TrunkStore } from './trunks.js';

const copy = <T>(v: T): T => structuredClone(v);

/** The embedded trunks store: Maps in insertion (creation) order, gone at exit. */
export class MemoryTrunkStore implements TrunkStore {
  readonly #trunks = new Map<string, TrunkRecord>();
  readonly #children: { [K in ChildKind]: Map<string, ChildRecords[K]> } = { credential: new Map(), ipacl: new Map(), uri: new Map() };
  /** lower-cased username → credential id */
  readonly #usernames = new Map<string, string>();

  async createTrunk(t: TrunkRecord): Promise<void> {
    this.#trunks.set(t.trunkId, copy(t));
  }

  async getTrunk(trunkId: string): Promise<TrunkRecord | null> {
    const t = this.#trunks.get(trunkId);
    return t ? copy(t) : null;
  }

  async listTrunks(authId: string): Promise<TrunkRecord[]> {
    return [...this.#trunks.values()].filter((t) => t.authId === authId).map(copy);
  }

  async updateTrunk(t: TrunkRecord): Promise<boolean> {
    const old = this.#trunks.get(t.trunkId);
    if (!old || old.authId !== t.authId) return false;
    this.#trunks.set(t.trunkId, copy(t));
    return true;
  }

  async deleteTrunk(authId: string, trunkId: string): Promise<boolean> {
    const t = this.#trunks.get(trunkId);
    if (!t || t.authId !== authId) return false;
    this.#trunks.delete(trunkId);
    for (const kind of ['credential', 'ipacl', 'uri'] as const) {
      for (const [id, c] of this.#children[kind]) {
        if (c.trunkId !== trunkId) continue;
        this.#children[kind].delete(id);
        if (kind === 'credential') this.#usernames.delete((c as TrunkCredentialRecord).username.toLowerCase());
      }
    }
    return true;
  }

  async putChild<K extends ChildKind>(kind: K, rec: ChildRecords[K]): Promise<PutChildResult> {
    const t = this.#trunks.get(rec.trunkId);
    if (!t || t.authId !== rec.authId) return 'no_trunk';
    const map = this.#children[kind] as Map<string, ChildRecords[K]>;
    if (kind === 'credential') {
      const c = rec as TrunkCredentialRecord;
      const holder = this.#usernames.get(c.username.toLowerCase());
      if (holder !== undefined && holder !== c.id) return 'username_taken';
      const old = map.get(c.id) as TrunkCredentialRecord | undefined;
      if (old) this.#usernames.delete(old.username.toLowerCase());
      this.#usernames.set(c.username.toLowerCase(), c.id);
    }
    map.set(rec.id, copy(rec));
    return 'ok';
  }

  async getChild<K extends ChildKind>(kind: K, id: string): Promise<ChildRecords[K] | null> {
    const c = (this.#children[kind] as Map<string, ChildRecords[K]>).get(id);
    return c ? copy(c) : null;
  }

  async listChildren<K extends ChildKind>(kind: K, authId: string): Promise<Array<ChildRecords[K]>> {
    return [...(this.#children[kind] as Map<string, ChildRecords[K]>).values()].filter((c) => c.authId === authId).map(copy);
  }

  async childrenOf<K extends ChildKind>(kind: K, trunkId: string): Promise<Array<ChildRecords[K]>> {
    return [...(this.#children[kind] as Map<string, ChildRecords[K]>).values()].filter((c) => c.trunkId === trunkId).map(copy);
  }

  async deleteChild(kind: ChildKind, authId: string, id: string): Promise<boolean> {
    const map = this.#children[kind] as Map<string, ChildRecords[ChildKind]>;
    const c = map.get(id);
    if (!c || c.authId !== authId) return false;
    map.delete(id);
    if (kind === 'credential') this.#usernames.delete((c as TrunkCredentialRecord).username.toLowerCase());
    return true;
  }

  async credentialByUsername(username: string): Promise<TrunkCredentialRecord | null> {
    const id = this.#usernames.get(username.toLowerCase());
    const c = id === undefined ? undefined : this.#children.credential.get(id);
    return c ? copy(c) : null;
  }

  async allAcls(): Promise<Array<{ acl: IpAclRecord; trunk: TrunkRecord }>> {
    const out: Array<{ acl: IpAclRecord; trunk: TrunkRecord }> = [];
    for (const acl of this.#children.ipacl.values()) {
      const trunk = this.#trunks.get(acl.trunkId);
      if (trunk) out.push({ acl: copy(acl), trunk: copy(trunk) });
    }
    return out;
  }

  async close(): Promise<void> {
    // Kept: a closed embedded store is simply no longer used.
  }
}
