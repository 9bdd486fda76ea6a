/** CALLBACK_ALLOWED_NETWORKS (README "Configuration", docs/callbacks.md). */
import { describe, expect, it } from 'vitest';
import { DEFAULTS, loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

describe('CALLBACK_ALLOWED_NETWORKS', () => {
  it('defaults to no network', () => {
    expect(DEFAULTS.callbackAllowedNetworks).toEqual([]);
    expect(loadConfig({}, { configFile: null }).callbackAllowedNetworks).toEqual([]);
  });

  it('reads comma-separated IPv4 and IPv6 CIDR blocks and single addresses; none = empty', () => {
    const c = loadConfig({ CALLBACK_ALLOWED_NETWORKS: ' 10.20.0.0/16, fd00::/8 ,127.0.0.1,::1/128' }, { configFile: null });
    expect(c.callbackAllowedNetworks).toEqual(['10.20.0.0/16', 'fd00::/8', '127.0.0.1', '::1/128']);
    expect(loadConfig({ CALLBACK_ALLOWED_NETWORKS: 'none' }, { configFile: null }).callbackAllowedNetworks).toEqual([]);
  });

  it.each(['10.0.0.0/33', 'fd00::/129', 'example.com', '10.0.0/8', '10.0.0.0/8/1', '10.0.0.0/x', '::g/64'])(
    'refuses %s with a ConfigError naming the variable',
    (v) => {
      expect(() => loadConfig({ CALLBACK_ALLOWED_NETWORKS: v }, { configFile: null })).toThrowError(ConfigError);
      expect(() => loadConfig({ CALLBACK_ALLOWED_NETWORKS: v }, { configFile: null })).toThrowError(/CALLBACK_ALLOWED_NETWORKS must list CIDR blocks/);
    },
  );
});

describe('CALLBACK_TIMEOUT, CALLBACK_RETRY_DELAYS, CALLBACK_LEASE', () => {
  it('default to the documented schedule: 3 s attempts, retries 2, 4 and 8 s apart, a 15 s lease', () => {
    const c = loadConfig({}, { configFile: null });
    expect([c.callbackTimeout, c.callbackRetryDelays, c.callbackLease]).toEqual([3, [2, 4, 8], 15]);
  });

  it('read seconds with decimals, and refuse what is not one with the setting named', () => {
    const c = loadConfig({ CALLBACK_TIMEOUT: '1.5', CALLBACK_RETRY_DELAYS: '0.5, 1,30', CALLBACK_LEASE: '4' }, { configFile: null });
    expect([c.callbackTimeout, c.callbackRetryDelays, c.callbackLease]).toEqual([1.5, [0.5, 1, 30], 4]);
    expect(loadConfig({ CALLBACK_RETRY_DELAYS: 'none' }, { configFile: null }).callbackRetryDelays).toEqual([]);
    expect(() => loadConfig({ CALLBACK_TIMEOUT: '0' }, { configFile: null })).toThrowError(/CALLBACK_TIMEOUT must be a number of seconds/);
    expect(() => loadConfig({ CALLBACK_RETRY_DELAYS: '1,x' }, { configFile: null })).toThrowError(/CALLBACK_RETRY_DELAYS/);
    expect(() => loadConfig({ CALLBACK_RETRY_DELAYS: Array(11).fill('1').join(',') }, { configFile: null })).toThrowError(/at most 10/);
    expect(() => loadConfig({ CALLBACK_LEASE: '-1' }, { configFile: null })).toThrowError(ConfigError);
  });
});
