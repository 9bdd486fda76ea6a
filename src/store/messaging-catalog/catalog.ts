/**
 * The messaging catalog store service (docs/messaging-catalog.md): an owner's contacts,
 * WhatsApp templates, canned responses, registered numbers, call requests and campaigns,
 * and the campaign runner's state (recipients, per-contact claims, progress counters,
 * the run lease).
 *
 * An owner is the Auth ID of the calling account or sub-account. Records are kept as
 * the capability (src/messaging/catalog/) writes them; the store checks only what must
 * be atomic: a contact's phone is unique per owner (an upsert by phone updates), a
 * campaign changes status only from the statuses the caller expects, a contact of a
 * campaign is claimed at most once, and one runner at a time holds a campaign's lease.
 */

export interface ContactRecord {
  id: string;
  owner: string;
  /** E.164 with its `+`, unique per owner. */
  phone: string;
  name: string;
  tags: string[];
  attributes: Record<string, string>;
  createdAt: string;
  updatedAt: string;
}

export type TemplateStatus = 'PENDING' | 'APPROVED' | 'REJECTED' | 'PAUSED' | 'DISABLED' | 'IN_APPEAL' | 'DELETED' | 'UNKNOWN';

export interface TemplateRecord {
  id: string;
  owner: string;
  channelId: string;
  name: string;
  language: string;
  category: string;
  components: unknown[];
  status: TemplateStatus;
  /** The provider's template id (Meta's `id`), when it answered one. */
  providerId: string | null;
  /** The provider's reason for a rejection, when it gave one. */
  rejectedReason: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface CannedResponseRecord {
  id: string;
  owner: string;
  /** The short code agents type (`/greet`), unique per owner. */
  shortcut: string;
  text: string;
  createdAt: string;
}

export interface NumberRecord {
  id: string;
  owner: string;
  channelId: string;
  /** E.164, unique per owner. */
  phoneNumber: string;
  /** The provider's phone number id (WhatsApp `phone_number_id`). */
  phoneNumberId: string;
  displayName: string;
  createdAt: string;
}

export interface CallRequestRecord {
  id: string;
  owner: string;
  channelId: string;
  to: string;
  /** What was asked: a call-permission request or a business-initiated call. */
  action: 'permission_request' | 'connect';
  /** `recorded`: stored, not sent to the provider (docs/messaging-catalog.md "Calls"). */
  status: 'recorded';
  createdAt: string;
}

export type CampaignStatus = 'draft' | 'running' | 'paused' | 'completed' | 'cancelled';

export interface CampaignTemplate {
  name: string;
  language: string;
  components: unknown[];
}

export interface CampaignAudience {
  contactIds?: string[];
  tag?: string;
}

export interface CampaignRecord {
  id: string;
  owner: string;
  name: string;
  channelId: string;
  template: CampaignTemplate;
  audience: CampaignAudience;
  /** Messages per second. */
  rate: number;
  status: CampaignStatus;
  createdAt: string;
  updatedAt: string;
  startedAt: string | null;
  completedAt: string | null;
}

/** Where one contact of a campaign stands. */
export type ClaimState = 'claimed' | 'sent' | 'failed' | 'unconfirmed';

export interface ClaimRecord {
  state: ClaimState;
  /** Our message id (the idempotency key handed to the sender). */
  messageId: string;
  /** The runner that claimed it. */
  holder: string;
  /** The sender's message id once sent. */
  sentId?: string;
  error?: string;
}

export interface CampaignProgress {
  /** Recipients snapshotted at the first start (0 before). */
  total: number;
  sent: number;
  failed: number;
  /** Claimed by a runner that stopped before it learnt the outcome; never re-sent. */
  unconfirmed: number;
  /** Claimed and being sent now. */
  inFlight: number;
  /** Index of the next recipient to consider. */
  cursor: number;
}

export type UpsertContactResult = { created: boolean; contact: ContactRecord };

/** A contact to upsert by phone: fields present replace, tags and attributes merge. */
export interface ContactUpsert {
  phone: string;
  name?: string;
  tags?: string[];
  attributes?: Record<string, string>;
}

export interface MessagingCatalogStore {
  // ---- contacts ----
  /**
   * Create or update contacts by phone, in order (later rows win). A new contact gets
   * `newId(i)`; an existing one keeps its id, its fields replaced where given, tags
   * and attributes merged. `now` stamps createdAt/updatedAt.
   */
  upsertContacts(owner: string, rows: ContactUpsert[], newId: (i: number) => string, now: string): Promise<UpsertContactResult[]>;
  /** Replace a contact (same owner); 'phone_taken' when another contact has the phone; 'not_found'. */
  replaceContact(c: ContactRecord): Promise<'ok' | 'phone_taken' | 'not_found'>;
  getContact(owner: string, id: string): Promise<ContactRecord | null>;
  getContacts(owner: string, ids: string[]): Promise<Array<ContactRecord | null>>;
  /** Every contact of an owner, oldest first. */
  listContacts(owner: string): Promise<ContactRecord[]>;
  deleteContact(owner: string, id: string): Promise<boolean>;

  // ---- templates, canned responses, numbers, call requests (plain records by id) ----
  putTemplate(t: TemplateRecord): Promise<void>;
  listTemplates(owner: string): Promise<TemplateRecord[]>;
  deleteTemplate(owner: string, id: string): Promise<boolean>;
  /** 'taken' when the owner has another canned response with this shortcut. */
  createCanned(c: CannedResponseRecord): Promise<'ok' | 'taken'>;
  listCanned(owner: string): Promise<CannedResponseRecord[]>;
  deleteCanned(owner: string, id: string): Promise<boolean>;
  /** 'taken' when the owner already registered this phone number. */
  createNumber(n: NumberRecord): Promise<'ok' | 'taken'>;
  listNumbers(owner: string): Promise<NumberRecord[]>;
  getNumber(owner: string, id: string): Promise<NumberRecord | null>;
  deleteNumber(owner: string, id: string): Promise<boolean>;
  createCall(c: CallRequestRecord): Promise<void>;
  listCalls(owner: string): Promise<CallRequestRecord[]>;
  getCall(owner: string, id: string): Promise<CallRequestRecord | null>;

  // ---- campaigns ----
  createCampaign(c: CampaignRecord): Promise<void>;
  getCampaign(owner: string, id: string): Promise<CampaignRecord | null>;
  listCampaigns(owner: string): Promise<CampaignRecord[]>;
  /**
   * Replace a campaign when its stored status is one of `from`; the stored record after,
   * or `{conflict: status}` (null when there is no such campaign). A campaign written
   * with status `running` is listed by {@link runningCampaigns}, and unlisted otherwise.
   */
  updateCampaign(c: CampaignRecord, from: readonly CampaignStatus[]): Promise<CampaignRecord | { conflict: CampaignStatus } | null>;
  /** Delete a campaign and its run state; false when there is none. */
  deleteCampaign(owner: string, id: string): Promise<boolean>;
  /** Campaigns with status `running`, of every owner. */
  runningCampaigns(): Promise<Array<{ owner: string; id: string }>>;

  // ---- campaign run state ----
  /** Snapshot the recipients once; later calls keep the first list. Returns the total. */
  setRecipients(campaignId: string, contactIds: string[]): Promise<number>;
  /** Recipients [start, start + count). */
  recipients(campaignId: string, start: number, count: number): Promise<string[]>;
  /**
   * Claim one contact before sending to it: true when it was unclaimed (the claim is
   * recorded, in-flight, and the cursor moves past `index`); false when it was claimed
   * before, by anyone.
   */
  claim(campaignId: string, index: number, contactId: string, messageId: string, holder: string): Promise<boolean>;
  /** Record the outcome of a claimed (or unconfirmed) contact; false when it was not claimed. */
  settle(campaignId: string, contactId: string, outcome: { state: 'sent'; sentId: string } | { state: 'failed'; error: string }): Promise<boolean>;
  /** Move every in-flight claim to `unconfirmed` (after a runner vanished); how many. */
  markUnconfirmed(campaignId: string): Promise<number>;
  progress(campaignId: string): Promise<CampaignProgress>;
  getClaim(campaignId: string, contactId: string): Promise<ClaimRecord | null>;
  /** Take the run lease when free or already ours; true when held. */
  acquireLease(campaignId: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Extend the lease when ours; false when it is someone else's or lapsed to nobody-then-someone. */
  renewLease(campaignId: string, holder: string, ttlMs: number): Promise<boolean>;
  releaseLease(campaignId: string, holder: string): Promise<void>;

  close(): Promise<void>;
}
