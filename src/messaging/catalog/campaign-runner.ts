/**
 * The campaign runner (docs/messaging-catalog.md "Campaigns"): sends a running
 * campaign's template to each recipient at the campaign's rate, at most once per
 * contact — across pauses, restarts, crashes and several nodes.
 *
 * @remarks
 * - One runner at a time per campaign: a runner sends only while it holds the
 *   campaign's lease in the store (renewed at a third of its lifetime); every node
 *   runs a runner, which looks for running campaigns nobody holds every `runnerPollMs`
 *   (so a restarted or surviving node resumes them).
 * - Claim before send: before the sender is called for a contact, the runner records an
 *   atomic claim (contact → message id; HSETNX on Redis). A contact already claimed —
 *   by this runner earlier, by another node, or before a crash — is skipped. So a
 *   second runner racing the first (an expired lease, a partition) still cannot message
 *   a contact twice.
 * - The crash rule: a claim whose outcome was never recorded (the process died between
 *   claim and confirmation) may or may not have reached the provider. A runner that
 *   takes over the lease marks such claims `unconfirmed` and never re-sends them: at
 *   most once wins over at least once. They are counted in the progress (`unconfirmed`)
 *   and the campaign completes without them. The sender is handed a stable
 *   idempotency key per (campaign, contact) so that an operator's later retry through
 *   the send API cannot double-send either.
 * - A stop() (SIGTERM, restart) stops claiming, waits for the sends in flight and
 *   records their outcomes, then releases the lease: a graceful restart leaves nothing
 *   unconfirmed.
 */
import type { Logger } from '../../logger.js';
import type { CampaignRecord, ContactRecord, MessagingCatalogStore } from '../../store/messaging-catalog/catalog.js';
import type { CatalogSettings } from './settings.js';
import { substitute } from './substitute.js';

/** What a campaign send asks of the messaging core (wired to its sender at the composition root). */
export interface CampaignSendRequest {
  channelId: string;
  /** The contact's E.164 phone. */
  to: string;
  type: 'template';
  template: { name: string; language: string; components: unknown[] };
  campaignId: string;
  /** Stable per (campaign, contact): `campaign:<campaign id>:<contact id>`. */
  idempotencyKey: string;
}

/** The messaging core's sender as the runner uses it. A throw or status `failed` counts the contact failed. */
export interface CampaignSender {
  send(owner: string, req: CampaignSendRequest): Promise<{ id: string; status: string }>;
}

/** The idempotency key (and claim message id) of one contact of one campaign. */
export const campaignMessageKey = (campaignId: string, contactId: string): string => `campaign:${campaignId}:${contactId}`;

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err)).slice(0, 200);

export class CampaignRunner {
  readonly #store: MessagingCatalogStore;
  readonly #sender: CampaignSender;
  readonly #log: Logger;
  readonly #settings: Readonly<CatalogSettings>;
  /** This runner's name in claims and leases. */
  readonly holder: string;
  readonly #active = new Map<string, Promise<void>>();
  #timer: NodeJS.Timeout | null = null;
  #stopping = false;
  #polling: Promise<void> | null = null;

  constructor(deps: { store: MessagingCatalogStore; sender: CampaignSender; log: Logger; settings: Readonly<CatalogSettings>; holder: string }) {
    this.#store = deps.store;
    this.#sender = deps.sender;
    this.#log = deps.log;
    this.#settings = deps.settings;
    this.holder = deps.holder;
  }

  /** Look for running campaigns now and every `runnerPollMs`. */
  start(): void {
    if (this.#timer) return;
    this.#stopping = false;
    // The timer is the runner's job (resuming campaigns), so it is not unref()ed.
    this.#timer = setInterval(() => this.kick(), this.#settings.runnerPollMs);
    this.kick();
  }

  /** Look for running campaigns without a runner now (after a start through the API). */
  kick(): void {
    if (this.#stopping || this.#polling) return;
    this.#polling = this.#poll()
      .catch((err: unknown) => this.#log.warn({ err: errorText(err) }, 'campaign poll failed'))
      .finally(() => {
        this.#polling = null;
      });
  }

  /** Stop claiming, wait for the sends in flight and their outcomes, release the leases. */
  async stop(): Promise<void> {
    this.#stopping = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#polling;
    await Promise.all(this.#active.values());
  }

  async #poll(): Promise<void> {
    for (const { owner, id } of await this.#store.runningCampaigns()) {
      if (this.#stopping) return;
      if (this.#active.has(id)) continue;
      if (!(await this.#store.acquireLease(id, this.holder, this.#settings.runnerLeaseMs))) continue;
      const run = this.#run(owner, id)
        .catch((err: unknown) => this.#log.warn({ campaignId: id, err: errorText(err) }, 'campaign run stopped by an error'))
        .finally(async () => {
          await this.#store.releaseLease(id, this.holder).catch(() => undefined);
          this.#active.delete(id);
        });
      this.#active.set(id, run);
    }
  }

  async #run(owner: string, id: string): Promise<void> {
    const store = this.#store;
    // Claims nobody confirmed belong to a runner that is gone: never re-sent (the crash rule).
    const orphaned = await store.markUnconfirmed(id);
    let campaign = await store.getCampaign(owner, id);
    if (!campaign || campaign.status !== 'running') return;
    const start = await store.progress(id);
    this.#log.info({ campaignId: id, cursor: start.cursor, total: start.total, orphaned }, 'campaign run started');
    const total = start.total;
    let cursor = start.cursor;
    const inFlight = new Set<Promise<void>>();
    const t0 = Date.now();
    let issued = 0;
    let lastRenew = t0;
    let lastCheck = t0;
    let rescanned = false;
    /** When this runner last had recipients left to consider. */
    let endedAt = t0;
    const tick = this.#settings.runnerTickMs;
    const maxInFlight = Math.max(10, campaign.rate * 2);

    try {
      while (!this.#stopping) {
        const now = Date.now();
        if (now - lastRenew >= this.#settings.runnerLeaseMs / 3) {
          if (!(await store.renewLease(id, this.holder, this.#settings.runnerLeaseMs))) {
            this.#log.warn({ campaignId: id }, 'campaign lease lost; another runner has it');
            return;
          }
          lastRenew = now;
        }
        if (now - lastCheck >= 200) {
          const c = await store.getCampaign(owner, id);
          if (!c || c.status !== 'running') return;
          campaign = c;
          lastCheck = now;
        }
        if (cursor >= total) {
          if (inFlight.size > 0) {
            await Promise.race(inFlight);
            continue;
          }
          const p = await store.progress(id);
          if (p.sent + p.failed + p.unconfirmed < total) {
            if (!rescanned) {
              // The stored cursor is the highest claimed index: lower recipients may be
              // unclaimed (another runner ran ahead, then died). One pass from the start
              // claims them; the claimed ones are skipped.
              rescanned = true;
              cursor = 0;
              continue;
            }
            if (p.inFlight > 0 && Date.now() - endedAt < this.#settings.runnerLeaseMs) {
              // Sends of another runner that overlapped this one: wait for their outcomes.
              await new Promise((r) => setTimeout(r, tick * 5));
              continue;
            }
            // Their runner is gone: the crash rule (unconfirmed, never re-sent).
            await store.markUnconfirmed(id);
          }
          const done: CampaignRecord = { ...campaign, status: 'completed', completedAt: new Date().toISOString(), updatedAt: new Date().toISOString() };
          await store.updateCampaign(done, ['running']);
          this.#log.info({ campaignId: id }, 'campaign completed');
          return;
        }
        endedAt = Date.now();
        // Pace: the n-th send of this run at t0 + n / rate; no burst beyond one tick.
        let budget = Math.min(Math.floor(((Date.now() - t0) * campaign.rate) / 1000) - issued, maxInFlight - inFlight.size);
        while (budget > 0 && cursor < total && !this.#stopping) {
          const ids = await store.recipients(id, cursor, Math.min(budget, 200));
          if (ids.length === 0) {
            cursor = total;
            break;
          }
          const contacts = await store.getContacts(owner, ids);
          for (let i = 0; i < ids.length && budget > 0; i++) {
            const index = cursor;
            cursor++;
            const contactId = ids[i] as string;
            const key = campaignMessageKey(id, contactId);
            if (!(await store.claim(id, index, contactId, key, this.holder))) continue;
            issued++;
            budget--;
            const p = this.#sendOne(owner, campaign, contactId, contacts[i] ?? null, key).finally(() => inFlight.delete(p));
            inFlight.add(p);
          }
        }
        await new Promise((r) => setTimeout(r, tick));
      }
    } finally {
      // Paused, stopped, lease lost or failed: the sends already started finish and are recorded.
      await Promise.all(inFlight);
    }
  }

  async #sendOne(owner: string, campaign: CampaignRecord, contactId: string, contact: ContactRecord | null, key: string): Promise<void> {
    const store = this.#store;
    let outcome: { state: 'sent'; sentId: string } | { state: 'failed'; error: string };
    if (contact === null) {
      outcome = { state: 'failed', error: 'the contact was deleted' };
    } else {
      const s = substitute(campaign.template.components, contact);
      if (!s.ok) {
        outcome = { state: 'failed', error: `the contact has no ${s.missing}` };
      } else {
        try {
          const r = await this.#sender.send(owner, {
            channelId: campaign.channelId,
            to: contact.phone,
            type: 'template',
            template: { name: campaign.template.name, language: campaign.template.language, components: s.components },
            campaignId: campaign.id,
            idempotencyKey: key,
          });
          outcome = r.status === 'failed' ? { state: 'failed', error: 'the provider failed the message' } : { state: 'sent', sentId: r.id };
        } catch (err) {
          outcome = { state: 'failed', error: errorText(err) };
        }
      }
    }
    try {
      await store.settle(campaign.id, contactId, outcome);
    } catch (err) {
      // The claim stays in flight; the next runner counts it unconfirmed (never re-sent).
      this.#log.warn({ campaignId: campaign.id, contactId, err: errorText(err) }, 'campaign outcome not recorded');
    }
  }
}
