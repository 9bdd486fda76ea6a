/** The money settings: ADMIN_AUTH_TOKEN, DEFAULT_CURRENCY, partners[].currency, RATE_DECK_FILE. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { createBilling } from '../../src/billing/index.js';

const P = { PARTNER_AUTH_ID: 'P1', PARTNER_AUTH_TOKEN: 'p'.repeat(20), DATA_ENCRYPTION_KEY: `k1:${Buffer.alloc(32, 1).toString('base64')}` };

describe('money settings', () => {
  it('ADMIN_AUTH_TOKEN: unset in production = no admin routes; development makes one (flagged to be shown once); too short is refused without echoing it', () => {
    expect(loadConfig({ NODE_ENV: 'production', ...P }, { configFile: null }).adminAuthToken).toBe(null);
    const dev = loadConfig({}, { configFile: null });
    expect(dev.adminTokenGenerated).toBe(true);
    expect(dev.adminAuthToken?.length).toBeGreaterThanOrEqual(24);
    const set = loadConfig({ ADMIN_AUTH_TOKEN: 'operator-secret-0123456789' }, { configFile: null });
    expect(set.adminAuthToken).toBe('operator-secret-0123456789');
    expect(set.adminTokenGenerated).toBeUndefined();
    let err: unknown;
    try {
      loadConfig({ ADMIN_AUTH_TOKEN: 'short-secret' }, { configFile: null });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe('ADMIN_AUTH_TOKEN must be at least 16 characters');
  });

  it('workers take their primary’s development partner whole (id, token, may transfer)', () => {
    const w = loadConfig({ SIP_EDGE_DEV_PARTNER_TOKEN: 'the-primary-token-0123456789' }, { configFile: null });
    expect(w.partners).toMatchObject([{ id: 'dev-partner', authId: 'DEVPARTNER', authToken: 'the-primary-token-0123456789', canTransferBalance: true, currency: 'USD' }]);
  });

  it('DEFAULT_CURRENCY (USD) is every partner’s currency unless partners[].currency says otherwise; unknown codes are refused', () => {
    expect(loadConfig({}, { configFile: null }).defaultCurrency).toBe('USD');
    const dir = mkdtempSync(join(tmpdir(), 'cfg-money-'));
    const file = join(dir, 'c.json');
    writeFileSync(file, JSON.stringify({ partners: [{ auth_id: 'PA', auth_token: 'a'.repeat(20), currency: 'inr' }, { auth_id: 'PB', auth_token: 'b'.repeat(20) }] }));
    const c = loadConfig({ DEFAULT_CURRENCY: 'eur' }, { configFile: file });
    expect(c.partners.map((p) => [p.authId, p.currency])).toEqual([
      ['PA', 'INR'],
      ['PB', 'EUR'],
    ]);
    expect(() => loadConfig({ DEFAULT_CURRENCY: 'DOLLAR' }, { configFile: null })).toThrow(/DEFAULT_CURRENCY must be an ISO 4217/);
    writeFileSync(file, JSON.stringify({ partners: [{ auth_id: 'PA', auth_token: 'a'.repeat(20), currency: 'XXX' }] }));
    expect(() => loadConfig({}, { configFile: file })).toThrow(/partners\[0\]\.currency/);
  });

  it('RATE_DECK_FILE: a bad line stops the start (ConfigError naming the line)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-deck-'));
    const file = join(dir, 'rates.csv');
    writeFileSync(file, '1,0.01,6,6,0,USD,ok\n44,0.02,60,60,0,USD\n44,x,60,60,0,USD,bad\n');
    const config = loadConfig({ RATE_DECK_FILE: file }, { configFile: null });
    expect(config.rateDeckFile).toBe(file);
    expect(() => createBilling({ config, redis: null })).toThrow(`rate deck ${file} line 3: rate_per_minute "x" must be a decimal ≥ 0 with at most 5 decimals`);
  });
});
