/**
 * The settings of the messaging catalog, each with its default, in one object. The
 * composition root passes overrides (the WhatsApp base URL comes from the messaging
 * channels' config, `WHATSAPP_API_BASE_URL`).
 */
export interface CatalogSettings {
  /** The WhatsApp Cloud API (Graph API) base, with its version; tests point it at a stub. */
  whatsappApiBaseUrl: string;
  /** How long one provider request may take, ms. */
  providerTimeoutMs: number;
  /** A campaign's rate when none is given, messages per second. */
  campaignDefaultRate: number;
  /** The highest rate a campaign may ask for, messages per second. */
  campaignMaxRate: number;
  /** Most data rows a contacts CSV import takes (more → 413, nothing imported). */
  importMaxRows: number;
  /** Largest contacts CSV file, bytes (more → 413, nothing imported). */
  importMaxBytes: number;
  /** How often the campaign runner looks for running campaigns without a runner, ms. */
  runnerPollMs: number;
  /** Lifetime of a runner's lease on a campaign, ms; renewed at a third of it. */
  runnerLeaseMs: number;
  /** Pacing tick of a running campaign, ms. */
  runnerTickMs: number;
}

export const CATALOG_DEFAULTS: Readonly<CatalogSettings> = Object.freeze({
  whatsappApiBaseUrl: 'https://graph.facebook.com/v21.0',
  providerTimeoutMs: 10_000,
  campaignDefaultRate: 20,
  campaignMaxRate: 500,
  importMaxRows: 50_000,
  importMaxBytes: 10 * 1024 * 1024,
  runnerPollMs: 1_000,
  runnerLeaseMs: 15_000,
  runnerTickMs: 20,
});
