import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULTS, loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

describe('loadConfig', () => {
  it('gives the documented defaults with an empty environment', () => {
    const c = loadConfig({}, { configFile: null });
    expect(c.udpPort).toBe(5060);
    expect(c.tcpPort).toBe(5060);
    expect(c.tlsPort).toBe(5061);
    expect(c.wsPort).toBe(5066);
    expect(c.wssPort).toBe(7443);
    expect(c.httpPort).toBe(8080);
    expect(c.minExpires).toBe(DEFAULTS.minExpires);
    expect(c.digestAlgorithms).toEqual(['SHA-256', 'MD5']);
    expect(c.redisUrl).toBeNull();
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('reads 0 as a free port and off as a disabled listener', () => {
    const c = loadConfig({ SIP_UDP_PORT: '0', SIP_WSS_PORT: 'off', HTTP_PORT: 'OFF' }, { configFile: null });
    expect(c.udpPort).toBe(0);
    expect(c.wssPort).toBeNull();
    expect(c.httpPort).toBeNull();
  });

  it.each([
    [{ SIP_UDP_PORT: '70000' }, /SIP_UDP_PORT/],
    [{ SIP_MIN_EXPIRES: 'ten' }, /SIP_MIN_EXPIRES/],
    [{ SIP_MIN_EXPIRES: '100', SIP_MAX_EXPIRES: '50', SIP_DEFAULT_EXPIRES: '60' }, /SIP_MIN_EXPIRES must not exceed/],
    [{ REDIS_URL: 'http://x' }, /REDIS_URL/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
    [{ DIGEST_ALGORITHMS: 'SHA-512' }, /DIGEST_ALGORITHMS/],
    [{ SIP_DOMAIN: 'bad domain' }, /SIP_DOMAIN/],
    [{ TLS_CERT_FILE: '/nonexistent/cert.pem' }, /TLS_CERT_FILE/],
  ])('refuses %o with a ConfigError naming the variable', (env, re) => {
    expect(() => loadConfig(env as Record<string, string>, { configFile: null })).toThrowError(ConfigError);
    expect(() => loadConfig(env as Record<string, string>, { configFile: null })).toThrowError(re);
  });

  it('reads a JSON config file with partners, overridden by the environment', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
    const file = join(dir, 'c.json');
    writeFileSync(file, JSON.stringify({ SIP_DOMAIN: 'voice.example', SIP_MAX_CONTACTS: 3, partners: [{ auth_id: 'P1', auth_token: 'a'.repeat(20) }] }));
    const c = loadConfig({ SIP_MAX_CONTACTS: '5' }, { configFile: file });
    expect(c.sipDomain).toBe('voice.example');
    expect(c.maxContacts).toBe(5);
    expect(c.partners.map((p) => p.authId)).toEqual(['P1']);
  });

  it('makes a random development partner only outside production', () => {
    const dev = loadConfig({}, { configFile: null });
    expect(dev.partners).toHaveLength(1);
    expect(dev.partners[0].generated).toBe(true);
    expect(dev.partners[0].authToken.length).toBeGreaterThanOrEqual(24);
    expect(loadConfig({}, { configFile: null }).partners[0].authToken).not.toBe(dev.partners[0].authToken);
    expect(loadConfig({ NODE_ENV: 'production', DATA_ENCRYPTION_KEY: `k1:${Buffer.alloc(32, 1).toString('base64')}` }, { configFile: null }).partners).toHaveLength(0);
  });

  it('refuses the example partner token in production', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
    const file = join(dir, 'c.json');
    writeFileSync(file, JSON.stringify({ partners: [{ auth_id: 'P1', auth_token: 'dev-partner-token-change-me' }] }));
    expect(() => loadConfig({ NODE_ENV: 'production' }, { configFile: file })).toThrowError(/refused/);
  });
});
