/**
 * DATA_ENCRYPTION_KEY (README "Configuration", "Secrets at rest"): the key ring, its
 * checks (the error names the setting, never the key), required in production, and the
 * development key (derived from NONCE_SECRET, else random for the run, with a warning).
 */
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { MAIN, ROOT } from '../support/edge-process.mjs';

const load = (env: Record<string, string>) => loadConfig(env, { configFile: null });
const b64 = (n: number): string => randomBytes(n).toString('base64');

describe('DATA_ENCRYPTION_KEY', () => {
  it('reads the key ring in order (the first seals)', () => {
    const k1 = b64(32);
    const k2 = b64(32);
    const c = load({ DATA_ENCRYPTION_KEY: `2025:${k1},2024:${k2}` });
    expect(c.dataKeySource).toBe('configured');
    expect(c.dataEncryptionKeys).toEqual([
      { kid: '2025', key: k1 },
      { kid: '2024', key: k2 },
    ]);
  });

  it.each([
    ['k1:short', /DATA_ENCRYPTION_KEY: the key of kid "k1" must be 32 bytes/],
    [`k1:${b64(31)}`, /DATA_ENCRYPTION_KEY: the key of kid "k1" must be 32 bytes/],
    ['k1:***', /DATA_ENCRYPTION_KEY: the key of kid "k1" is not base64/],
    [b64(32), /DATA_ENCRYPTION_KEY: entry 1 must be kid:base64key/],
  ])('refuses %s with a ConfigError naming the setting', (v, re) => {
    expect(() => load({ DATA_ENCRYPTION_KEY: v })).toThrowError(ConfigError);
    expect(() => load({ DATA_ENCRYPTION_KEY: v })).toThrowError(re);
  });

  it('is required in production', () => {
    expect(() => load({ NODE_ENV: 'production', PARTNER_AUTH_ID: 'P1', PARTNER_AUTH_TOKEN: 'p1-token-0123456789abc' })).toThrowError(
      /DATA_ENCRYPTION_KEY is required when NODE_ENV=production/,
    );
    const c = load({ NODE_ENV: 'production', DATA_ENCRYPTION_KEY: `k1:${b64(32)}` });
    expect(c.dataKeySource).toBe('configured');
  });

  it('development without it: derived from NONCE_SECRET (the same for every process that shares it), else random per run', () => {
    const a = load({ NONCE_SECRET: 'nonce-secret-0123456789' });
    const b = load({ NONCE_SECRET: 'nonce-secret-0123456789' });
    const other = load({ NONCE_SECRET: 'nonce-secret-9876543210' });
    expect(a.dataKeySource).toBe('nonce-secret');
    expect(a.dataEncryptionKeys).toHaveLength(1);
    expect(a.dataEncryptionKeys[0]?.kid).toBe('dev');
    expect(a.dataEncryptionKeys).toEqual(b.dataEncryptionKeys);
    expect(other.dataEncryptionKeys[0]?.key).not.toBe(a.dataEncryptionKeys[0]?.key);
    // Not the nonce secret itself.
    expect(Buffer.from(a.dataEncryptionKeys[0]?.key ?? '', 'base64').toString('utf8')).not.toContain('nonce-secret');

    const r1 = load({});
    const r2 = load({});
    expect(r1.dataKeySource).toBe('random');
    expect(r1.dataEncryptionKeys[0]?.kid).toMatch(/^run-[0-9a-f]{8}$/);
    expect(r1.dataEncryptionKeys[0]?.key).not.toBe(r2.dataEncryptionKeys[0]?.key);
  });

  it('the server stops with one line naming the setting, exit code 2, and never prints the key', () => {
    const key = b64(24);
    const r = spawnSync(process.execPath, [MAIN], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, DATA_ENCRYPTION_KEY: `k1:${key}`, SIP_EDGE_CONFIG: '' },
      encoding: 'utf8',
      timeout: 15_000,
    });
    expect(r.status).toBe(2);
    const out = r.stderr + r.stdout;
    expect(out.trim().split('\n')).toHaveLength(1);
    expect(out).toMatch(/configuration error: DATA_ENCRYPTION_KEY: the key of kid "k1" must be 32 bytes/);
    expect(out).not.toContain(key);
  });

  it('production without it: exit code 2 with one line saying it is required', () => {
    const r = spawnSync(process.execPath, [MAIN], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, NODE_ENV: 'production', PARTNER_AUTH_ID: 'P1', PARTNER_AUTH_TOKEN: 'p1-token-0123456789abc', SIP_EDGE_CONFIG: '' },
      encoding: 'utf8',
      timeout: 15_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/DATA_ENCRYPTION_KEY is required when NODE_ENV=production/);
  });
});
