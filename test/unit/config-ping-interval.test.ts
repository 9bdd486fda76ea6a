/** SIP_PING_INTERVAL (flow liveness, README "Flows", docs/flows.md). */
import { describe, expect, it } from 'vitest';
import { DEFAULTS, loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

describe('SIP_PING_INTERVAL', () => {
  it('defaults to 30 s, written once in DEFAULTS', () => {
    expect(DEFAULTS.pingInterval).toBe(30);
    expect(loadConfig({}, { configFile: null }).pingInterval).toBe(30);
  });

  it('reads whole seconds from 1 to 3600', () => {
    expect(loadConfig({ SIP_PING_INTERVAL: '1' }, { configFile: null }).pingInterval).toBe(1);
    expect(loadConfig({ SIP_PING_INTERVAL: ' 3600 ' }, { configFile: null }).pingInterval).toBe(3600);
  });

  it.each(['0', '3601', '1.5', 'off', '-5'])('refuses %s with a ConfigError naming the variable', (v) => {
    expect(() => loadConfig({ SIP_PING_INTERVAL: v }, { configFile: null })).toThrowError(ConfigError);
    expect(() => loadConfig({ SIP_PING_INTERVAL: v }, { configFile: null })).toThrowError(/SIP_PING_INTERVAL must be an integer 1-3600/);
  });
});
