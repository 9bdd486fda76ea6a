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
