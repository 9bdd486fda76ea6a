/**
 * The messaging catalog (docs/messaging-catalog.md): contacts (with the CSV import),
 * WhatsApp templates (submitted to the provider), canned responses, the account's
 * WhatsApp numbers, call requests and campaigns with their runner — built by
 * {@link createMessagingCatalog}, the one builder the composition root calls. It stands
 * on two interfaces the messaging core provides: {@link ChannelAccess} (a channel's
 * WhatsApp credentials) and {@link CampaignSender} (a template send).
 */
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Config } from '../../config.js';
import type { Logger } from '../../logger.js';
import { normalizeE164, E164_PROBLEM } from '../../numbers/e164.js';
import type { RedisClient } from '../../store/redis/client.js';
import type {
  CallRequestRecord,
  CampaignAudience,
  CampaignProgress,
  CampaignRecord,
  CampaignStatus,
  CampaignTemplate,
  CannedResponseRecord,
  ContactRecord,
  MessagingCatalogStore,
  NumberRecord,
  TemplateRecord,
  TemplateStatus,
} from '../../store/messaging-catalog/catalog.js';
import { MemoryMessagingCatalogStore } from '../../store/messaging-catalog/memory.js';
import { RedisMessagingCatalogStore } from '../../store/messaging-catalog/redis.js';
import { CampaignRunner, type CampaignSender } from './campaign-runner.js';
import { CatalogError } from './catalog-error.js';
import { importContacts, parseTags, type ImportReport } from './contact-import.js';
import { CATALOG_DEFAULTS, type CatalogSettings } from './settings.js';
import { TemplateProvider, type WhatsAppAccess } from './template-provider.js';

export { CatalogError } from './catalog-error.js';
export { CATALOG_DEFAULTS, type CatalogSettings } from './settings.js';
export { campaignMessageKey, type CampaignSender, type CampaignSendRequest } from './campaign-runner.js';
export type { ImportReport } from './contact-import.js';
export type { WhatsAppAccess } from './template-provider.js';
export type {
  CallRequestRecord,
  CampaignProgress,
  CampaignRecord,
  CampaignStatus,
  CannedResponseRecord,
  ContactRecord,
  NumberRecord,
  TemplateRecord,
} from '../../store/messaging-catalog/catalog.js';

/** A channel's WhatsApp credentials, from the messaging core's channels (null: no such WhatsApp channel of `owner`). */
export interface ChannelAccess {
  whatsapp(owner: string, channelId: string): Promise<WhatsAppAccess | null>;
}

export interface MessagingCatalogDeps {
  config: Readonly<Config>;
  /** The shared Redis (campaign state shared by every node), or null for process memory. */
  redis: RedisClient | null;
  log: Logger;
  channels: ChannelAccess;
  sender: CampaignSender;
  /** Overrides of {@link CATALOG_DEFAULTS} (the WhatsApp base URL from the channels' config). */
  settings?: Partial<CatalogSettings>;
  /** A store of the caller's (tests); else one on `redis` or in memory. */
  store?: MessagingCatalogStore;
}

export interface ContactInput {
  phone?: string;
  name?: string;
  tags?: string[];
  attributes?: Record<string, string>;
}

export interface CampaignInput {
  name?: string;
  channelId?: string;
  template?: CampaignTemplate;
  audience?: CampaignAudience;
  rate?: number;
  status?: 'cancelled';
}

export interface MessagingCatalog {
  readonly settings: Readonly<CatalogSettings>;
  readonly store: MessagingCatalogStore;
  readonly runner: CampaignRunner;
  // contacts
  createContact(owner: string, input: ContactInput): Promise<ContactRecord>;
  listContacts(owner: string, filter: { tag?: string; search?: string }): Promise<ContactRecord[]>;
  getContact(owner: string, id: string): Promise<ContactRecord>;
  updateContact(owner: string, id: string, input: ContactInput): Promise<ContactRecord>;
  deleteContact(owner: string, id: string): Promise<void>;
  importContacts(owner: string, csv: Readable, truncated: () => boolean): Promise<ImportReport>;
  // templates
  createTemplate(owner: string, input: { channelId: string; name: string; language: string; category: string; components: unknown[] }): Promise<TemplateRecord>;
  listTemplates(owner: string, opts: { channelId?: string; refresh: boolean }): Promise<TemplateRecord[]>;
  deleteTemplate(owner: string, name: string, channelId?: string): Promise<number>;
  // canned responses
  createCanned(owner: string, input: { shortcut: string; text: string }): Promise<CannedResponseRecord>;
  listCanned(owner: string): Promise<CannedResponseRecord[]>;
  deleteCanned(owner: string, id: string): Promise<void>;
  // numbers
  createNumber(owner: string, input: { channelId: string; phoneNumber: string; phoneNumberId?: string; displayName?: string }): Promise<NumberRecord>;
  listNumbers(owner: string): Promise<NumberRecord[]>;
  getNumber(owner: string, id: string): Promise<NumberRecord>;
  deleteNumber(owner: string, id: string): Promise<void>;
  // calls
  createCall(owner: string, input: { channelId: string; to: string; action: CallRequestRecord['action'] }): Promise<CallRequestRecord>;
  listCalls(owner: string): Promise<CallRequestRecord[]>;
  getCall(owner: string, id: string): Promise<CallRequestRecord>;
  // campaigns
  createCampaign(owner: string, input: CampaignInput): Promise<CampaignRecord>;
  listCampaigns(owner: string): Promise<CampaignRecord[]>;
  getCampaign(owner: string, id: string): Promise<CampaignRecord>;
  progress(id: string): Promise<CampaignProgress>;
  updateCampaign(owner: string, id: string, input: CampaignInput): Promise<CampaignRecord>;
  deleteCampaign(owner: string, id: string): Promise<void>;
  startCampaign(owner: string, id: string): Promise<CampaignRecord>;
  pauseCampaign(owner: string, id: string): Promise<CampaignRecord>;
  /** Start the campaign runner (resumes running campaigns). */
  start(): Promise<void>;
  /** Stop the runner (sends in flight finish and are recorded); the store is closed by its owner. */
  stop(): Promise<void>;
}

const isoNow = (): string => new Date().toISOString();
const newId = (): string => randomUUID();

const KNOWN_STATUSES = new Set<TemplateStatus>(['PENDING', 'APPROVED', 'REJECTED', 'PAUSED', 'DISABLED', 'IN_APPEAL', 'DELETED']);
const templateStatus = (s: string): TemplateStatus => (KNOWN_STATUSES.has(s.toUpperCase() as TemplateStatus) ? (s.toUpperCase() as TemplateStatus) : 'UNKNOWN');

const notFound = (what: string): CatalogError => new CatalogError('not_found', `No such ${what}.`);
const invalid = (field: string, message: string): CatalogError => new CatalogError('invalid', message, 'invalid', field);

/** Build the messaging catalog; its runner starts with start(). */
export function createMessagingCatalog(deps: MessagingCatalogDeps): MessagingCatalog {
  const settings: Readonly<CatalogSettings> = Object.freeze({ ...CATALOG_DEFAULTS, ...deps.settings });
  const store = deps.store ?? (deps.redis ? new RedisMessagingCatalogStore(deps.redis) : new MemoryMessagingCatalogStore());
  const log = deps.log.child({ component: 'messaging-catalog' });
  const provider = new TemplateProvider(settings.whatsappApiBaseUrl, settings.providerTimeoutMs);
  const runner = new CampaignRunner({ store, sender: deps.sender, log, settings, holder: `${deps.config.nodeId}:${randomUUID()}` });

  const channel = async (owner: string, channelId: string): Promise<WhatsAppAccess> => {
    const a = await deps.channels.whatsapp(owner, channelId);
    if (a === null) throw new CatalogError('not_found', 'No such WhatsApp channel on this account.', 'channel_not_found');
    return a;
  };

  const contactFields = (input: ContactInput, base: ContactRecord): ContactRecord => {
    const out = { ...base };
    if (input.phone !== undefined) {
      const p = normalizeE164(input.phone);
      if (p === null) throw invalid('phone', E164_PROBLEM);
      out.phone = p;
    }
    if (input.name !== undefined) out.name = input.name;
    if (input.tags !== undefined) {
      const t = parseTags(input.tags.join(';'));
      if ('error' in t) throw invalid('tags', t.error.replace(/^tags: /, ''));
      out.tags = t.tags;
    }
    if (input.attributes !== undefined) out.attributes = { ...input.attributes };
    return out;
  };

  const campaignOf = async (owner: string, id: string): Promise<CampaignRecord> => {
    const c = await store.getCampaign(owner, id);
    if (!c) throw notFound('campaign');
    return c;
  };

  /** Write a campaign changed from `from`; a status that moved meanwhile is a 409 naming it. */
  const transition = async (c: CampaignRecord, from: readonly CampaignStatus[], verb: string): Promise<CampaignRecord> => {
    const r = await store.updateCampaign(c, from);
    if (r === null) throw notFound('campaign');
    if ('conflict' in r) throw new CatalogError('conflict', `A ${r.conflict} campaign cannot be ${verb}.`, 'campaign_state');
    return r;
  };

  const checkAudience = async (owner: string, a: CampaignAudience | undefined): Promise<void> => {
    if (!a) return;
    const hasIds = Array.isArray(a.contactIds);
    const hasTag = typeof a.tag === 'string';
    if (hasIds === hasTag) throw invalid('audience', 'must give exactly one of contact_ids and tag');
    if (hasIds) {
      const ids = a.contactIds as string[];
      if (ids.length === 0) throw invalid('audience', 'contact_ids must not be empty');
      const found = await store.getContacts(owner, ids);
      const missing = ids.filter((_, i) => found[i] === null);
      if (missing.length > 0) throw invalid('audience', `unknown contact ids: ${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', …' : ''}`);
    }
  };

  const checkRate = (rate: number | undefined): void => {
    if (rate !== undefined && (!Number.isInteger(rate) || rate < 1 || rate > settings.campaignMaxRate)) {
      throw invalid('rate', `must be an integer from 1 to ${settings.campaignMaxRate} (messages per second)`);
    }
  };

  const audienceIds = async (owner: string, a: CampaignAudience): Promise<string[]> => {
    if (a.contactIds) return [...new Set(a.contactIds)];
    const tag = a.tag ?? '';
    return (await store.listContacts(owner)).filter((c) => c.tags.includes(tag)).map((c) => c.id);
  };

  return {
    settings,
    store,
    runner,

    async createContact(owner, input) {
      const now = isoNow();
      const c = contactFields(input, { id: newId(), owner, phone: '', name: '', tags: [], attributes: {}, createdAt: now, updatedAt: now });
      if (c.phone === '') throw invalid('phone', 'is required');
      const existing = (await store.listContacts(owner)).find((x) => x.phone === c.phone);
      if (existing) throw new CatalogError('conflict', `A contact with phone ${c.phone} exists (${existing.id}).`, 'phone_taken');
      const [r] = await store.upsertContacts(owner, [{ phone: c.phone, name: c.name, tags: c.tags, attributes: c.attributes }], () => c.id, now);
      if (!r || !r.created) throw new CatalogError('conflict', `A contact with phone ${c.phone} exists.`, 'phone_taken');
      return r.contact;
    },
    async listContacts(owner, filter) {
      let all = await store.listContacts(owner);
      if (filter.tag !== undefined) all = all.filter((c) => c.tags.includes(filter.tag as string));
      if (filter.search !== undefined && filter.search !== '') {
        const s = filter.search.toLowerCase();
        const digits = s.replace(/[^0-9]/g, '');
        all = all.filter((c) => c.name.toLowerCase().includes(s) || (digits !== '' && c.phone.includes(digits)));
      }
      return all;
    },
    async getContact(owner, id) {
      const c = await store.getContact(owner, id);
      if (!c) throw notFound('contact');
      return c;
    },
    async updateContact(owner, id, input) {
      const old = await store.getContact(owner, id);
      if (!old) throw notFound('contact');
      const c = { ...contactFields(input, old), updatedAt: isoNow() };
      const r = await store.replaceContact(c);
      if (r === 'not_found') throw notFound('contact');
      if (r === 'phone_taken') throw new CatalogError('conflict', `Another contact has phone ${c.phone}.`, 'phone_taken');
      return c;
    },
    async deleteContact(owner, id) {
      if (!(await store.deleteContact(owner, id))) throw notFound('contact');
    },
    importContacts(owner, csv, truncated) {
      return importContacts(store, owner, csv, { maxRows: settings.importMaxRows, maxBytes: settings.importMaxBytes, truncated, newId, now: isoNow });
    },

    async createTemplate(owner, input) {
      const access = await channel(owner, input.channelId);
      const taken = (await store.listTemplates(owner)).find((t) => t.channelId === input.channelId && t.name === input.name && t.language === input.language);
      if (taken) throw new CatalogError('conflict', `Template ${input.name} (${input.language}) exists on this channel.`, 'template_exists');
      const r = await provider.submit(access, input);
      const now = isoNow();
      const t: TemplateRecord = {
        id: newId(),
        owner,
        channelId: input.channelId,
        name: input.name,
        language: input.language,
        category: r.category ?? input.category,
        components: input.components,
        status: templateStatus(r.status),
        providerId: r.id,
        rejectedReason: null,
        createdAt: now,
        updatedAt: now,
      };
      await store.putTemplate(t);
      return t;
    },
    async listTemplates(owner, opts) {
      let all = await store.listTemplates(owner);
      if (opts.channelId !== undefined) all = all.filter((t) => t.channelId === opts.channelId);
      if (!opts.refresh) return all;
      const byChannel = new Map<string, TemplateRecord[]>();
      for (const t of all) byChannel.set(t.channelId, [...(byChannel.get(t.channelId) ?? []), t]);
      const out: TemplateRecord[] = [];
      for (const [channelId, ts] of byChannel) {
        const access = await deps.channels.whatsapp(owner, channelId);
        if (access === null) {
          out.push(...ts);
          continue;
        }
        const remote = await provider.list(access);
        for (const t of ts) {
          const r = remote.find((x) => x.name === t.name && x.language === t.language);
          const status = r ? templateStatus(r.status) : 'DELETED';
          const next: TemplateRecord = { ...t, status, providerId: r?.id || t.providerId, rejectedReason: r?.rejectedReason ?? null, category: r?.category || t.category };
          if (next.status !== t.status || next.providerId !== t.providerId || next.rejectedReason !== t.rejectedReason || next.category !== t.category) {
            next.updatedAt = isoNow();
            await store.putTemplate(next);
          }
          out.push(next);
        }
      }
      const order = new Map(all.map((t, i) => [t.id, i]));
      return out.sort((a, b) => (order.get(a.id) ?? 0) - (order.get(b.id) ?? 0));
    },
    async deleteTemplate(owner, name, channelId) {
      const matching = (await store.listTemplates(owner)).filter((t) => t.name === name && (channelId === undefined || t.channelId === channelId));
      if (matching.length === 0) throw notFound('template');
      for (const ch of new Set(matching.map((t) => t.channelId))) {
        const access = await deps.channels.whatsapp(owner, ch);
        if (access !== null) await provider.delete(access, name);
      }
      for (const t of matching) await store.deleteTemplate(owner, t.id);
      return matching.length;
    },

    async createCanned(owner, input) {
      const c: CannedResponseRecord = { id: newId(), owner, shortcut: input.shortcut, text: input.text, createdAt: isoNow() };
      if ((await store.createCanned(c)) === 'taken') throw new CatalogError('conflict', `The shortcut ${input.shortcut} is taken.`, 'shortcut_taken');
      return c;
    },
    listCanned: (owner) => store.listCanned(owner),
    async deleteCanned(owner, id) {
      if (!(await store.deleteCanned(owner, id))) throw notFound('canned response');
    },

    async createNumber(owner, input) {
      const phone = normalizeE164(input.phoneNumber);
      if (phone === null) throw invalid('phone_number', E164_PROBLEM);
      const access = await channel(owner, input.channelId);
      const n: NumberRecord = {
        id: newId(),
        owner,
        channelId: input.channelId,
        phoneNumber: phone,
        phoneNumberId: input.phoneNumberId ?? access.phoneNumberId,
        displayName: input.displayName ?? '',
        createdAt: isoNow(),
      };
      if ((await store.createNumber(n)) === 'taken') throw new CatalogError('conflict', `The number ${phone} is registered already.`, 'number_taken');
      return n;
    },
    listNumbers: (owner) => store.listNumbers(owner),
    async getNumber(owner, id) {
      const n = await store.getNumber(owner, id);
      if (!n) throw notFound('number');
      return n;
    },
    async deleteNumber(owner, id) {
      if (!(await store.deleteNumber(owner, id))) throw notFound('number');
    },

    async createCall(owner, input) {
      const to = normalizeE164(input.to);
      if (to === null) throw invalid('to', E164_PROBLEM);
      await channel(owner, input.channelId);
      const c: CallRequestRecord = { id: newId(), owner, channelId: input.channelId, to, action: input.action, status: 'recorded', createdAt: isoNow() };
      await store.createCall(c);
      return c;
    },
    listCalls: (owner) => store.listCalls(owner),
    async getCall(owner, id) {
      const c = await store.getCall(owner, id);
      if (!c) throw notFound('call');
      return c;
    },

    async createCampaign(owner, input) {
      if (!input.name || !input.channelId || !input.template || !input.audience) throw invalid('body', 'name, channel_id, template and audience are required');
      checkRate(input.rate);
      await channel(owner, input.channelId);
      await checkAudience(owner, input.audience);
      const now = isoNow();
      const c: CampaignRecord = {
        id: newId(),
        owner,
        name: input.name,
        channelId: input.channelId,
        template: input.template,
        audience: input.audience,
        rate: input.rate ?? settings.campaignDefaultRate,
        status: 'draft',
        createdAt: now,
        updatedAt: now,
        startedAt: null,
        completedAt: null,
      };
      await store.createCampaign(c);
      return c;
    },
    listCampaigns: (owner) => store.listCampaigns(owner),
    getCampaign: campaignOf,
    progress: (id) => store.progress(id),
    async updateCampaign(owner, id, input) {
      const old = await campaignOf(owner, id);
      if (old.status !== 'draft' && old.status !== 'paused') throw new CatalogError('conflict', `A ${old.status} campaign cannot be changed; pause it first.`, 'campaign_state');
      if (old.status === 'paused' && (input.audience !== undefined || (input.channelId !== undefined && input.channelId !== old.channelId))) {
        throw new CatalogError('conflict', 'The audience and channel of a started campaign are fixed.', 'campaign_state');
      }
      checkRate(input.rate);
      if (input.channelId !== undefined) await channel(owner, input.channelId);
      await checkAudience(owner, input.audience);
      const c: CampaignRecord = {
        ...old,
        name: input.name ?? old.name,
        channelId: input.channelId ?? old.channelId,
        template: input.template ?? old.template,
        audience: input.audience ?? old.audience,
        rate: input.rate ?? old.rate,
        status: input.status ?? old.status,
        updatedAt: isoNow(),
      };
      return transition(c, [old.status], 'changed');
    },
    async deleteCampaign(owner, id) {
      const c = await campaignOf(owner, id);
      if (c.status === 'running') throw new CatalogError('conflict', 'A running campaign cannot be deleted; pause it first.', 'campaign_running');
      if (!(await store.deleteCampaign(owner, id))) throw notFound('campaign');
    },
    async startCampaign(owner, id) {
      const c = await campaignOf(owner, id);
      if (c.status !== 'draft' && c.status !== 'paused') throw new CatalogError('conflict', `A ${c.status} campaign cannot be started.`, 'campaign_state');
      // The audience is fixed at the first start; a resume keeps the first snapshot.
      await store.setRecipients(id, c.status === 'draft' ? await audienceIds(owner, c.audience) : []);
      const now = isoNow();
      const r = await transition({ ...c, status: 'running', startedAt: c.startedAt ?? now, updatedAt: now }, [c.status], 'started');
      runner.kick();
      return r;
    },
    async pauseCampaign(owner, id) {
      const c = await campaignOf(owner, id);
      return transition({ ...c, status: 'paused', updatedAt: isoNow() }, ['running'], 'paused');
    },

    async start() {
      runner.start();
    },
    async stop() {
      await runner.stop();
    },
  };
}
